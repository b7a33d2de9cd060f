"""The compile stage: an int8 model -> a target artifact (Arm Ethos-U via Vela) with the compiler's own estimate."""
