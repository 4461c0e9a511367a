"""Lets scrapyd-deploy build the project egg; the metadata lives in pyproject.toml."""

from setuptools import setup

setup()
