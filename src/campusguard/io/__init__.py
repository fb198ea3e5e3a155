"""Reading images and media sources, writing results."""
