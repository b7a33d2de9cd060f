"""Demo model (8x8 handwritten digits CNN) and the script that builds it and its data."""
