// libpng reports errors through longjmp, which Swift cannot catch: the helpers below wrap the
// setjmp so a corrupt file becomes an error code instead of a crash.
//
// They use libpng's simplified API (png_image), which does its own setjmp inside every call
// (png_safe_execute) and stores the error text in png_image.message. Keeping the whole decode
// in these C functions means no libpng call, and so no longjmp, ever runs in a Swift frame.
#include <png.h>
#include <stdint.h>
#include <string.h>

/// What facetrain needs from a PNG header, read without decoding any pixel.
typedef struct {
    uint32_t width;
    uint32_t height;
    /// 1 when the file stores colour (RGB or a colour palette), 0 for grey.
    int hasColor;
    /// 1 when the file has an alpha channel or a tRNS transparency chunk.
    int hasAlpha;
    /// libpng's error text when the call fails.
    char message[64];
} facetrain_png_header;

static inline void facetrain_png_copy_message(char *destination, const png_image *image) {
    strncpy(destination, image->message, 63);
    destination[63] = '\0';
}

/// Reads the PNG header from memory; returns 1 on success, 0 on failure with `header->message` set.
static inline int facetrain_png_read_header(const void *bytes, size_t count, facetrain_png_header *header) {
    png_image image;
    memset(&image, 0, sizeof image);
    memset(header, 0, sizeof *header);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, bytes, count)) {
        facetrain_png_copy_message(header->message, &image);
        png_image_free(&image);
        return 0;
    }
    header->width = image.width;
    header->height = image.height;
    header->hasColor = (image.format & PNG_FORMAT_FLAG_COLOR) != 0;
    header->hasAlpha = (image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
    png_image_free(&image);
    return 1;
}

/// Decodes a whole PNG from memory into 8-bit grey (`channels` 1) or RGB (`channels` 3), row-major.
///
/// Every PNG flavour is accepted: grey, grey+alpha, RGB, RGBA, palette, 1/2/4/8/16 bits, interlaced.
/// 16-bit samples without gAMA/sRGB chunks are taken as sRGB-encoded (as almost every tool writes
/// them) and scaled to 8 bits, not gamma-converted as if linear. Alpha is composited on black in
/// sRGB space (colour * alpha / 255), so transparent pixels become black whatever colour they hide.
///
/// `pixels` must hold width * height * (channels + 1) bytes: the alpha channel is decoded in place
/// first, then packed away. Returns 1 on success, 0 on failure with libpng's text in `message`.
static inline int facetrain_png_decode(const void *bytes, size_t count, int channels, unsigned char *pixels,
                                       size_t capacity, char message[64]) {
    png_image image;
    memset(&image, 0, sizeof image);
    message[0] = '\0';
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, bytes, count)) {
        facetrain_png_copy_message(message, &image);
        png_image_free(&image);
        return 0;
    }
    int hasAlpha = (image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
    int stored = channels + hasAlpha;
    size_t pixelCount = (size_t)image.width * (size_t)image.height;
    if (capacity < pixelCount * (size_t)stored) {
        strcpy(message, "facetrain: pixel buffer too small");
        png_image_free(&image);
        return 0;
    }
    image.format = (channels == 3 ? PNG_FORMAT_RGB : 0) | (hasAlpha ? PNG_FORMAT_FLAG_ALPHA : 0);
    image.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    if (!png_image_finish_read(&image, NULL, pixels, 0, NULL)) {
        facetrain_png_copy_message(message, &image);
        png_image_free(&image);
        return 0;
    }
    if (hasAlpha) {
        // Reading index i * stored is never behind writing index i * channels, so packing in place is safe.
        for (size_t i = 0; i < pixelCount; i++) {
            const unsigned char *source = pixels + i * (size_t)stored;
            unsigned char *target = pixels + i * (size_t)channels;
            unsigned alpha = source[channels];
            for (int c = 0; c < channels; c++) {
                target[c] = (unsigned char)((source[c] * alpha + 127) / 255);
            }
        }
    }
    return 1;
}
