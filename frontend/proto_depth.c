/* proto_depth.c — a guard run before protobuf-c decodes a model: protobuf-c
 * recurses once per nested message with no limit, so a small hostile file
 * (graph -> node -> attribute -> graph -> ...) would overflow the stack.
 * This walks the wire format with the generated descriptors, iteratively per
 * message and recursively only into message-typed fields, and reports nesting
 * deeper than a limit. Malformed input is left for the decoder to reject. */
#include <stdbool.h>
#include <stdint.h>

#include "frontend/fe_internal.h"

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    if (*p >= end) return false;
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* False only if messages nest deeper than depth_left below this one. */
static bool depth_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end,
                     int depth_left) {
  while (p < end) {
    uint64_t key, v;
    if (!read_varint(&p, end, &key)) return true;
    switch (key & 7) {
    case 0: /* varint */
      if (!read_varint(&p, end, &v)) return true;
      break;
    case 1: /* fixed64 */
      if (end - p < 8) return true;
      p += 8;
      break;
    case 5: /* fixed32 */
      if (end - p < 4) return true;
      p += 4;
      break;
    case 2: { /* length-delimited: bytes, string, packed, or a message */
      if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p)) return true;
      uint64_t number = key >> 3;
      const ProtobufCFieldDescriptor *f =
          number <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number)
                               : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (depth_left == 0) return false;
        if (!depth_ok(f->descriptor, p, p + v, depth_left - 1)) return false;
      }
      p += v;
      break;
    }
    default:
      return true; /* groups or garbage: the decoder rejects them */
    }
  }
  return true;
}

bool kn_fe_model_depth_ok(const uint8_t *data, size_t size, int max_depth) {
  return depth_ok(&onnx__model_proto__descriptor, data, data + size, max_depth);
}
