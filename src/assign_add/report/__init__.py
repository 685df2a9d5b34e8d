"""The reproduction: claims C1-C11 with criteria, and the HTML / Markdown report."""
