"""Circuits, how heads work together: attribution, patching, composition, one head's circuits, the circuit walk and the
circuit found."""
