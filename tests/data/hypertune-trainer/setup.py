"""A trainer packaged the way AI Platform's docs package one: setup.py with install_requires,
built by gcloud (here trainctl) from --package-path's parent."""

from setuptools import find_packages, setup

setup(
    name="digits-hypertune-trainer",
    version="0.1",
    packages=find_packages(),
    install_requires=["cloudml-hypertune", "scikit-learn>=1.4"],
)
