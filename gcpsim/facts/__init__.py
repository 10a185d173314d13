"""The simulated world's own facts about Google Cloud, one table module per topic, each row citing
the Google source it was written from."""
