"""Firmware for Cortex-M: support check, project generation, build, sizes, QEMU/serial runs, deploy."""
