/*
 * imgfeed's shim over the system libjpeg-turbo (the libjpeg API, >= 1.5 for
 * jpeg_crop_scanline / jpeg_skip_scanlines and the JCS_EXT_* colour spaces).
 *
 * Everything libjpeg-specific stays here: the jpeg_decompress_struct (whose layout never
 * reaches Rust) and the error handling, which leaves the library by longjmp and so must
 * never cross a Rust frame. Rust sees an opaque handle and plain integers.
 *
 * Warnings: libjpeg reports damage it recovers from as warnings. Those that mean missing or
 * garbage pixels (premature end of file or of a segment, a bad Huffman or arithmetic code,
 * a marker where a restart was due, an inconsistent progression, bad scan parameters)
 * stop the decode as errors; those about metadata only (junk bytes before a marker, a
 * damaged ICC segment, an unknown Adobe transform code or JFIF revision) are tolerated, as
 * Pillow tolerates them. Any other warning stops the decode.
 */
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#if !defined(JCS_EXTENSIONS) || !defined(LIBJPEG_TURBO_VERSION_NUMBER)
#error "imgfeed's JPEG shim needs libjpeg-turbo's jpeglib.h"
#endif
#if LIBJPEG_TURBO_VERSION_NUMBER < 1005000
#error "imgfeed's JPEG shim needs libjpeg-turbo >= 1.5"
#endif

/* Scans a progressive file may have before it is refused (a tiny file with thousands of
 * scans is a CPU bomb; libjpeg-turbo's own tools use the same limit). */
#define IFJ_MAX_SCANS 500

struct ifj_error {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int tolerated;
};

struct ifj {
  struct jpeg_decompress_struct cinfo;
  struct ifj_error err;
  struct jpeg_progress_mgr progress;
};

static void ifj_error_exit(j_common_ptr cinfo) {
  struct ifj_error *e = (struct ifj_error *)cinfo->err;
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

/* Warnings about metadata: the pixels decode as without them. */
static int ifj_tolerated(int code) {
  switch (code) {
    case JWRN_EXTRANEOUS_DATA: /* junk bytes before a marker */
    case JWRN_JFIF_MAJOR:      /* unknown JFIF revision */
    case JWRN_ADOBE_XFORM:     /* unknown Adobe transform code */
#ifdef JWRN_BOGUS_ICC
    case JWRN_BOGUS_ICC: /* damaged ICC profile segment */
#endif
      return 1;
    default:
      return 0;
  }
}

static void ifj_emit_message(j_common_ptr cinfo, int level) {
  struct ifj_error *e = (struct ifj_error *)cinfo->err;
  if (level >= 0) {
    return; /* trace messages */
  }
  if (ifj_tolerated(cinfo->err->msg_code)) {
    e->tolerated++;
    cinfo->err->num_warnings++;
    return;
  }
  ifj_error_exit(cinfo);
}

static void ifj_progress(j_common_ptr cinfo) {
  if (cinfo->is_decompressor) {
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->input_scan_number > IFJ_MAX_SCANS) {
      struct ifj_error *e = (struct ifj_error *)cinfo->err;
      snprintf(e->message, sizeof e->message, "progressive JPEG with more than %d scans (a decompression bomb?)",
               IFJ_MAX_SCANS);
      longjmp(e->jump, 1);
    }
  }
}

struct ifj *ifj_new(void) {
  struct ifj *volatile d = (struct ifj *)calloc(1, sizeof(struct ifj));
  if (d == NULL) {
    return NULL;
  }
  d->cinfo.err = jpeg_std_error(&d->err.pub);
  d->err.pub.error_exit = ifj_error_exit;
  d->err.pub.emit_message = ifj_emit_message;
  if (setjmp(d->err.jump)) {
    free(d);
    return NULL;
  }
  jpeg_create_decompress(&d->cinfo);
  d->progress.progress_monitor = ifj_progress;
  d->cinfo.progress = &d->progress;
  return d;
}

void ifj_free(struct ifj *d) {
  if (d != NULL) {
    jpeg_destroy_decompress(&d->cinfo);
    free(d);
  }
}

/* The message of the last failure (valid until the next call on this handle). */
const char *ifj_message(const struct ifj *d) { return d->err.message; }

/* Warnings tolerated during the last call. */
int ifj_tolerated_warnings(const struct ifj *d) { return d->err.tolerated; }

/* The libjpeg-turbo version this shim was compiled against (e.g. 2001005 for 2.1.5). */
int ifj_version(void) { return LIBJPEG_TURBO_VERSION_NUMBER; }

struct ifj_header {
  unsigned int width;
  unsigned int height;
  int components;
  /* 0 greyscale, 1 YCbCr or RGB, 2 CMYK or YCCK (libjpeg cannot make RGB of those). */
  int color;
  int progressive;
  /* Width in pixels of an iMCU: a decoded region's left edge is a multiple of it. */
  unsigned int mcu_width;
};

static void ifj_reset(struct ifj *d) {
  d->err.message[0] = '\0';
  d->err.tolerated = 0;
}

/* Read the header of data[0..len) and start decompressing to out_color_space with
 * Pillow's settings (accurate integer IDCT, fancy upsampling), at 1/scale_denom of the
 * size (1, 2, 4 or 8: DCT scaling, Pillow's draft). Call it inside the caller's setjmp:
 * libjpeg's errors longjmp to that frame. */
static void ifj_start(struct ifj *d, const unsigned char *data, size_t len, J_COLOR_SPACE out_color_space,
                      int scale_denom) {
  jpeg_mem_src(&d->cinfo, data, (unsigned long)len);
  jpeg_read_header(&d->cinfo, TRUE);
  d->cinfo.out_color_space = out_color_space;
  d->cinfo.scale_num = 1;
  d->cinfo.scale_denom = (unsigned int)scale_denom;
  d->cinfo.dct_method = JDCT_ISLOW;
  d->cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&d->cinfo);
}

/* Read the header of data[0..len). 0 on success, -1 with ifj_message on failure. */
int ifj_header(struct ifj *d, const unsigned char *data, size_t len, struct ifj_header *out) {
  ifj_reset(d);
  if (setjmp(d->err.jump)) {
    jpeg_abort_decompress(&d->cinfo);
    return -1;
  }
  jpeg_mem_src(&d->cinfo, data, (unsigned long)len);
  jpeg_read_header(&d->cinfo, TRUE);
  out->width = d->cinfo.image_width;
  out->height = d->cinfo.image_height;
  out->components = d->cinfo.num_components;
  switch (d->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      out->color = 0;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      out->color = 2;
      break;
    default:
      out->color = 1;
      break;
  }
  out->progressive = jpeg_has_multiple_scans(&d->cinfo) ? 1 : 0;
  out->mcu_width = d->cinfo.num_components == 1 ? DCTSIZE : (unsigned int)(DCTSIZE * d->cinfo.max_h_samp_factor);
  jpeg_abort_decompress(&d->cinfo);
  return 0;
}

/* A rectangle of the image: rows [top, top + height), columns [left, left + width). */
struct ifj_rect {
  unsigned int top;
  unsigned int left;
  unsigned int height;
  unsigned int width;
};

/*
 * Decode the rectangle *rect (rows [top, top + height), columns [left, left + width)) of
 * data[0..len), decoded at 1/scale_denom of its size (1, 2, 4 or 8; the rectangle is in
 * the scaled image), into out (pitch width * channels, channels 3 for RGB or 4 for RGBX),
 * reading the rest of the file so that damage anywhere is found. left must be a multiple
 * of the header's mcu_width (libjpeg-turbo decodes whole iMCUs across); the whole image is
 * top = left = 0, height x width = the image's size. rect is read at the start, no pointer
 * to it kept. 0 on success, -1 with ifj_message.
 */
int ifj_decode(struct ifj *d, const unsigned char *data, size_t len, const struct ifj_rect *rect, int scale_denom,
               int channels, unsigned char *out, size_t out_len) {
  JDIMENSION x, w, row;
  unsigned int top, left, height, width;
  size_t pitch;
  ifj_reset(d);
  if (rect == NULL) {
    snprintf(d->err.message, sizeof d->err.message, "imgfeed: no region given");
    return -1;
  }
  top = rect->top;
  left = rect->left;
  height = rect->height;
  width = rect->width;
  if (channels != 3 && channels != 4) {
    snprintf(d->err.message, sizeof d->err.message, "imgfeed: %d channels asked for", channels);
    return -1;
  }
  if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
    snprintf(d->err.message, sizeof d->err.message, "imgfeed: scale 1/%d asked for", scale_denom);
    return -1;
  }
  if (setjmp(d->err.jump)) {
    jpeg_abort_decompress(&d->cinfo);
    return -1;
  }
  ifj_start(d, data, len, channels == 4 ? JCS_EXT_RGBX : JCS_EXT_RGB, scale_denom);
  if ((size_t)top + height > d->cinfo.output_height || (size_t)left + width > d->cinfo.output_width ||
      height == 0 || width == 0) {
    snprintf(d->err.message, sizeof d->err.message, "imgfeed: region %ux%u at (%u, %u) outside the %ux%u image",
             width, height, left, top, d->cinfo.output_width, d->cinfo.output_height);
    jpeg_abort_decompress(&d->cinfo);
    return -1;
  }
  x = left;
  w = width;
  if (left != 0 || width != d->cinfo.output_width) {
    jpeg_crop_scanline(&d->cinfo, &x, &w);
    if (x != left || w != width) {
      snprintf(d->err.message, sizeof d->err.message,
               "imgfeed: region left edge %u is not on an iMCU boundary (libjpeg-turbo gives %u, width %u)", left, x,
               w);
      jpeg_abort_decompress(&d->cinfo);
      return -1;
    }
  }
  pitch = (size_t)width * (size_t)channels;
  if (pitch * height > out_len) {
    snprintf(d->err.message, sizeof d->err.message, "imgfeed: output buffer too small");
    jpeg_abort_decompress(&d->cinfo);
    return -1;
  }
  if (top > 0) {
    jpeg_skip_scanlines(&d->cinfo, top);
  }
  while (d->cinfo.output_scanline < top + height) {
    JSAMPROW rowp = out + (size_t)(d->cinfo.output_scanline - top) * pitch;
    jpeg_read_scanlines(&d->cinfo, &rowp, 1);
  }
  row = d->cinfo.output_scanline;
  if (row < d->cinfo.output_height) {
    jpeg_skip_scanlines(&d->cinfo, d->cinfo.output_height - row);
  }
  jpeg_finish_decompress(&d->cinfo);
  return 0;
}

/*
 * Decode the whole of a CMYK or YCCK file into out (width * 4 bytes a row) as libjpeg's
 * CMYK (YCCK converted by libjpeg), the way Pillow reads it before its own conversion.
 * 0 on success, -1 with ifj_message.
 */
int ifj_decode_cmyk(struct ifj *d, const unsigned char *data, size_t len, unsigned char *out, size_t out_len) {
  size_t pitch;
  ifj_reset(d);
  if (setjmp(d->err.jump)) {
    jpeg_abort_decompress(&d->cinfo);
    return -1;
  }
  /* libjpeg converts YCCK to CMYK; any other colour space is an error here. */
  ifj_start(d, data, len, JCS_CMYK, 1);
  pitch = (size_t)d->cinfo.output_width * 4;
  if (d->cinfo.output_components != 4 || pitch * d->cinfo.output_height > out_len) {
    snprintf(d->err.message, sizeof d->err.message, "imgfeed: output buffer too small");
    jpeg_abort_decompress(&d->cinfo);
    return -1;
  }
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    JSAMPROW rowp = out + (size_t)d->cinfo.output_scanline * pitch;
    jpeg_read_scanlines(&d->cinfo, &rowp, 1);
  }
  jpeg_finish_decompress(&d->cinfo);
  return 0;
}
