"""Running artifacts on devices: one Runner interface for host, SSH, ADB, QEMU and serial boards."""
