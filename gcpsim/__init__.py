"""A GCP project on this machine: a stateful simulator of the Google APIs trainctl uses.

See server.py for how requests are served, state.py for the world document and time,
machines.py for what stands behind a simulated VM.
"""
