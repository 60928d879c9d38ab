/* The builtin base model's files, compiled into the binary so an installed facetrain needs
   neither the repository nor a network to find them. The assembler finds the files through the
   include path Package.swift gives it (base/builtin); `make base` retrains them. */
    .section .rodata
    .balign 16
    .global facetrain_base_manifest_start
    .global facetrain_base_manifest_end
facetrain_base_manifest_start:
    .incbin "manifest.json"
facetrain_base_manifest_end:
    .balign 16
    .global facetrain_base_weights_start
    .global facetrain_base_weights_end
facetrain_base_weights_start:
    .incbin "weights.h5"
facetrain_base_weights_end:
    .balign 16
    .global facetrain_base_bank_start
    .global facetrain_base_bank_end
facetrain_base_bank_start:
    .incbin "bank.h5"
facetrain_base_bank_end:
    .balign 16
    .global facetrain_base_sums_start
    .global facetrain_base_sums_end
facetrain_base_sums_start:
    .incbin "SHA256SUMS"
facetrain_base_sums_end:
    .section .note.GNU-stack,"",@progbits
