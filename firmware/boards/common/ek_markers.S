/* Instruction-count markers for the edgekit QEMU plugin (firmware/qemu_plugin/ekcount.c).
 *
 * Each marker is one `bx lr` at its own address. The host reads the addresses from the ELF symbol
 * table and passes them to the plugin, which records its executed-instruction counter whenever one
 * of them runs. They are written in assembly so the compiler can neither inline nor merge them.
 */
  .syntax unified
  .thumb
  .section .text.ek_markers, "ax", %progbits

  .macro EK_MARKER name
  .global \name
  .type \name, %function
  .thumb_func
  .balign 4
\name:
  bx lr
  .size \name, . - \name
  .endm

  EK_MARKER ek_marker_infer_begin
  EK_MARKER ek_marker_infer_end
  EK_MARKER ek_marker_op_begin
  EK_MARKER ek_marker_op_end
