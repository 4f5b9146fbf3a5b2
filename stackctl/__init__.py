"""stackctl: pin, prove, build and publish GPU inference image stacks from a declarative profile."""

__version__ = "0.1.0"
