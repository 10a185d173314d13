"""The simulator's own facts about GCP, one table module per topic, each row with its source. They
are written from Google's sources, never read from the product (infra.spec): where the two disagree,
a test names both sources."""
