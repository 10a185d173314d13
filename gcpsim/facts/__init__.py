"""The simulated Google Cloud's own facts: machine types, GPUs, TPU types, zones and GPU networking,
written from Google's pages and Google's own tooling, each block of rows with its source beside it.

Nothing here reads trainctl's catalog (infra/spec/catalog.py): the simulator is the world the product
is tested against, so a wrong product row must meet a simulator that does not share it.
tests/unit/providers/simulator/test_product_catalog_agrees_with_google_facts.py holds the two
against each other and names both sources where they disagree.
"""
