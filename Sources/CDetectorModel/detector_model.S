/* The builtin face detector's files, compiled into the binary like the builtin base
   (Sources/CBaseModel): the assembler finds them through the include path Package.swift gives it
   (detector/builtin); `make detector` retrains them. */
    .section .rodata
    .balign 16
    .global facetrain_detector_manifest_start
    .global facetrain_detector_manifest_end
facetrain_detector_manifest_start:
    .incbin "manifest.json"
facetrain_detector_manifest_end:
    .balign 16
    .global facetrain_detector_weights_start
    .global facetrain_detector_weights_end
facetrain_detector_weights_start:
    .incbin "weights.h5"
facetrain_detector_weights_end:
    .balign 16
    .global facetrain_detector_sums_start
    .global facetrain_detector_sums_end
facetrain_detector_sums_start:
    .incbin "SHA256SUMS"
facetrain_detector_sums_end:
    .section .note.GNU-stack,"",@progbits
