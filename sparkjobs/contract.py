"""Argument dataclasses of every Spark job, with to/from argv.

Standard library only: the operator imports this module to build job commands and must not pull in pyspark
or the rest of sparkjobs (an import-linter contract enforces it).
"""
