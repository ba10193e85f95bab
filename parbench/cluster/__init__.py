"""An emulated cluster on one machine: N "nodes" as Linux network namespaces (root + iproute2).

``netns`` builds and tears down the namespaces, links and shaping; ``job`` runs one parbench
command across them (one torchrun agent per namespace) and always removes what it made.
"""
