"""Boards shared through a labgrid lab: acquire a place, load firmware through its bootstrap driver, speak the
edgekit UART protocol over its serial resource, always release (``edgekit run ART --device labgrid:PLACE``)."""
