"""Jobs: what `trainctl run` composes. The experiment file and the Vertex AI / AI Platform job
specs it can be written as (translated without effects), then the run itself: up, bootstrap,
launch or sweep, collect, down; images and packages for the nodes."""
