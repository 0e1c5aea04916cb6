"""One module per Koordinator runtime hook; each exports a ``HOOK`` (see ``registry``)."""
