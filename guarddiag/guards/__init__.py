"""Outside guards: adapters behind one interface, and the generative back ends they share."""
