"""Delivery traces for trace-driven links: the file format (``format``) and generated traces
from capacity models (``models``)."""
