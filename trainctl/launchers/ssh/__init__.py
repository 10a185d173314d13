"""Jobs on nodes over pinned SSH: each node's command line, the sessions that run and watch
them, the attempt's supervision and the recovery of preempted nodes."""
