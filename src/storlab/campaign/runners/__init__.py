"""Runners turn one configuration into one measured run (see `base.Runner`)."""
