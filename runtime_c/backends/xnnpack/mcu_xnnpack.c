/* XNNPACK delegate: payload -> XNNPACK subgraph -> runtime. See mcu/delegate_xnnpack.h
 * and mcu/backends/xnnpack.py (the writer of the format read here). */
#include <stdlib.h>
#include <string.h>

#include <xnnpack.h>

#include "mcu/delegate_xnnpack.h"

#define XP_VERSION 1u
#define XP_HEADER 32u
#define XP_MAX_RANK 6u
#define XP_MAX_PARAMS 16u
#define XP_MAX_IDS 4u
#define XP_NONE 0xFFFFFFFFu

enum {
    XP_CONV2D = 1,
    XP_DEPTHWISE = 2,
    XP_FULLY_CONNECTED = 3,
    XP_ADD = 4,
    XP_MULTIPLY = 5,
    XP_MAX_POOL = 6,
    XP_AVG_POOL = 7,
    XP_GLOBAL_AVG_POOL = 8,
    XP_CLAMP = 9,
    XP_SIGMOID = 10,
    XP_HARDSWISH = 11,
    XP_SOFTMAX = 12
};

typedef struct {
    xnn_runtime_t runtime;
    uint32_t n_inputs, n_outputs;
    uint32_t *boundary_bytes; /* inputs then outputs */
    struct xnn_external_value *externals;
} xp_handle;

/* A bounds-checked little-endian reader over the payload. */
typedef struct {
    const uint8_t *p;
    uint32_t size, at;
    int bad;
} xp_reader;

static uint32_t rd_u32(xp_reader *r)
{
    if (r->bad || r->size - r->at < 4u || r->at > r->size) {
        r->bad = 1;
        return 0;
    }
    const uint8_t *b = r->p + r->at;
    r->at += 4u;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static float rd_f32(xp_reader *r)
{
    uint32_t bits = rd_u32(r);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* CRC-32 (the zlib polynomial), bitwise: init runs once per partition. */
static uint32_t crc32(const uint8_t *p, uint32_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (uint32_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) {
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
    }
    return ~c;
}

static size_t dtype_bytes(uint32_t dtype)
{
    switch (dtype) {
    case xnn_datatype_fp32: return 4;
    case xnn_datatype_qint8: return 1;
    case xnn_datatype_qint32: return 4;
    case xnn_datatype_qcint8: return 1;
    case xnn_datatype_qcint32: return 4;
    default: return 0;
    }
}

static void xp_free(xp_handle *h)
{
    if (h == NULL) {
        return;
    }
    if (h->runtime != NULL) {
        xnn_delete_runtime(h->runtime);
    }
    free(h->boundary_bytes);
    free(h->externals);
    free(h);
}

/* Define every value; ids[i] receives the XNNPACK id of payload value i. */
static mcu_status define_values(xp_reader *r, xnn_subgraph_t sg, uint32_t n_values, uint32_t *ids, xp_handle *h)
{
    const uint32_t n_boundary = h->n_inputs + h->n_outputs;
    for (uint32_t v = 0; v < n_values; ++v) {
        const uint32_t dtype = rd_u32(r);
        const uint32_t rank = rd_u32(r);
        MCU_REQUIRE(!r->bad && rank <= XP_MAX_RANK && dtype_bytes(dtype) != 0, MCU_ERR_DELEGATE_PAYLOAD);
        size_t dims[XP_MAX_RANK];
        size_t numel = 1;
        for (uint32_t d = 0; d < rank; ++d) {
            dims[d] = rd_u32(r);
            numel *= dims[d];
        }
        const uint32_t external = rd_u32(r);
        const int32_t zero_point = (int32_t)rd_u32(r);
        const float scale = rd_f32(r);
        const uint32_t channel_dim = rd_u32(r);
        const uint32_t n_scales = rd_u32(r);
        MCU_REQUIRE(!r->bad && n_scales <= (r->size - r->at) / 4u, MCU_ERR_DELEGATE_PAYLOAD);
        const uint32_t scales_at = r->at;
        r->at += 4u * n_scales;
        const uint32_t data_at = rd_u32(r);
        const uint32_t data_bytes = rd_u32(r);
        MCU_REQUIRE(!r->bad, MCU_ERR_DELEGATE_PAYLOAD);
        MCU_REQUIRE(external == XP_NONE || external < n_boundary, MCU_ERR_DELEGATE_PAYLOAD);
        MCU_REQUIRE(numel * dtype_bytes(dtype) <= 0xFFFFFFFFu, MCU_ERR_DELEGATE_PAYLOAD);
        const void *data = NULL;
        if (data_bytes != 0) {
            MCU_REQUIRE(external == XP_NONE && data_bytes == numel * dtype_bytes(dtype), MCU_ERR_DELEGATE_PAYLOAD);
            MCU_REQUIRE(data_at <= r->size && data_bytes <= r->size - data_at && data_at % 4u == 0,
                        MCU_ERR_DELEGATE_PAYLOAD);
            data = r->p + data_at;
        }
        uint32_t flags = 0;
        uint32_t ext_id = XNN_INVALID_VALUE_ID;
        if (external != XP_NONE) {
            flags = external < h->n_inputs ? XNN_VALUE_FLAG_EXTERNAL_INPUT : XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
            ext_id = external;
            h->boundary_bytes[external] = (uint32_t)(numel * dtype_bytes(dtype));
        }
        enum xnn_status s;
        if (dtype == xnn_datatype_fp32) {
            s = xnn_define_tensor_value(sg, xnn_datatype_fp32, rank, dims, data, ext_id, flags, &ids[v]);
        } else if (dtype == xnn_datatype_qcint8 || dtype == xnn_datatype_qcint32) {
            MCU_REQUIRE(channel_dim < rank && n_scales == dims[channel_dim], MCU_ERR_DELEGATE_PAYLOAD);
            MCU_REQUIRE(scales_at % 4u == 0, MCU_ERR_DELEGATE_PAYLOAD);
            /* The scales stay in the payload, which outlives the runtime. */
            s = xnn_define_channelwise_quantized_tensor_value(sg, (enum xnn_datatype)dtype,
                                                              (const float *)(const void *)(r->p + scales_at), rank,
                                                              channel_dim, dims, data, ext_id, flags, &ids[v]);
        } else {
            s = xnn_define_quantized_tensor_value(sg, (enum xnn_datatype)dtype, zero_point, scale, rank, dims, data,
                                                  ext_id, flags, &ids[v]);
        }
        MCU_REQUIRE(s == xnn_status_success, MCU_ERR_DELEGATE_FAILED);
    }
    return MCU_OK;
}

static mcu_status define_node(xp_reader *r, xnn_subgraph_t sg, uint32_t n_values, const uint32_t *vids)
{
    const uint32_t code = rd_u32(r);
    const uint32_t n_params = rd_u32(r);
    MCU_REQUIRE(!r->bad && n_params <= XP_MAX_PARAMS, MCU_ERR_DELEGATE_PAYLOAD);
    uint32_t p[XP_MAX_PARAMS] = {0};
    for (uint32_t i = 0; i < n_params; ++i) {
        p[i] = rd_u32(r);
    }
    const float lo = rd_f32(r);
    const float hi = rd_f32(r);
    const uint32_t n_ids = rd_u32(r);
    MCU_REQUIRE(!r->bad && n_ids <= XP_MAX_IDS, MCU_ERR_DELEGATE_PAYLOAD);
    uint32_t id[XP_MAX_IDS] = {XNN_INVALID_VALUE_ID, XNN_INVALID_VALUE_ID, XNN_INVALID_VALUE_ID,
                               XNN_INVALID_VALUE_ID};
    for (uint32_t i = 0; i < n_ids; ++i) {
        const uint32_t v = rd_u32(r);
        MCU_REQUIRE(v == XP_NONE || v < n_values, MCU_ERR_DELEGATE_PAYLOAD);
        id[i] = v == XP_NONE ? XNN_INVALID_VALUE_ID : vids[v];
    }
    MCU_REQUIRE(!r->bad, MCU_ERR_DELEGATE_PAYLOAD);
    enum xnn_status s;
    switch (code) {
    case XP_CONV2D:
        MCU_REQUIRE(n_params == 13 && n_ids == 4, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_convolution_2d(sg, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11],
                                      p[12], lo, hi, id[0], id[1], id[2], id[3], 0);
        break;
    case XP_DEPTHWISE:
        MCU_REQUIRE(n_params == 12 && n_ids == 4, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_depthwise_convolution_2d(sg, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9],
                                                p[10], p[11], lo, hi, id[0], id[1], id[2], id[3], 0);
        break;
    case XP_FULLY_CONNECTED:
        MCU_REQUIRE(n_params == 0 && n_ids == 4, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_fully_connected(sg, lo, hi, id[0], id[1], id[2], id[3], 0);
        break;
    case XP_ADD:
        MCU_REQUIRE(n_params == 0 && n_ids == 3, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_add2(sg, lo, hi, id[0], id[1], id[2], 0);
        break;
    case XP_MULTIPLY:
        MCU_REQUIRE(n_params == 0 && n_ids == 3, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_multiply2(sg, lo, hi, id[0], id[1], id[2], 0);
        break;
    case XP_MAX_POOL:
        MCU_REQUIRE(n_params == 10 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_max_pooling_2d(sg, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], lo, hi, id[0],
                                      id[1], 0);
        break;
    case XP_AVG_POOL:
        MCU_REQUIRE(n_params == 8 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_average_pooling_2d(sg, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], lo, hi, id[0], id[1],
                                          0);
        break;
    case XP_GLOBAL_AVG_POOL:
        MCU_REQUIRE(n_params == 0 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_global_average_pooling_2d(sg, lo, hi, id[0], id[1], 0);
        break;
    case XP_CLAMP:
        MCU_REQUIRE(n_params == 0 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_clamp(sg, lo, hi, id[0], id[1], 0);
        break;
    case XP_SIGMOID:
        MCU_REQUIRE(n_params == 0 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_sigmoid(sg, id[0], id[1], 0);
        break;
    case XP_HARDSWISH:
        MCU_REQUIRE(n_params == 0 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_hardswish(sg, id[0], id[1], 0);
        break;
    case XP_SOFTMAX:
        MCU_REQUIRE(n_params == 0 && n_ids == 2, MCU_ERR_DELEGATE_PAYLOAD);
        s = xnn_define_softmax(sg, id[0], id[1], 0);
        break;
    default:
        return MCU_ERR_DELEGATE_PAYLOAD;
    }
    MCU_REQUIRE(s == xnn_status_success, MCU_ERR_DELEGATE_FAILED);
    return MCU_OK;
}

static mcu_status build(xp_reader *r, xnn_subgraph_t sg, xp_handle *h, uint32_t n_values, uint32_t n_nodes)
{
    uint32_t *vids = (uint32_t *)calloc(n_values == 0 ? 1 : n_values, sizeof *vids);
    MCU_REQUIRE(vids != NULL, MCU_ERR_BUFFER_TOO_SMALL);
    mcu_status st = define_values(r, sg, n_values, vids, h);
    for (uint32_t i = 0; st == MCU_OK && i < n_nodes; ++i) {
        st = define_node(r, sg, n_values, vids);
    }
    free(vids);
    MCU_CHECK(st);
    for (uint32_t i = 0; i < h->n_inputs + h->n_outputs; ++i) {
        MCU_REQUIRE(h->boundary_bytes[i] != 0, MCU_ERR_DELEGATE_PAYLOAD); /* every boundary value defined */
        h->externals[i].id = i;
    }
    MCU_REQUIRE(xnn_create_runtime_v2(sg, NULL, 0, &h->runtime) == xnn_status_success, MCU_ERR_DELEGATE_FAILED);
    return MCU_OK;
}

static mcu_status xp_init(const uint8_t *payload, uint32_t size, void *arena, uint32_t arena_size, void **handle)
{
    (void)arena;
    (void)arena_size;
    xp_reader r = {payload, size, 8u, 0};
    const uint32_t declared = rd_u32(&r);
    const uint32_t checksum = rd_u32(&r);
    MCU_REQUIRE(size >= XP_HEADER && declared == size, MCU_ERR_DELEGATE_PAYLOAD);
    MCU_REQUIRE(checksum == crc32(payload + 16u, size - 16u), MCU_ERR_DELEGATE_PAYLOAD);
    const uint32_t n_values = rd_u32(&r);
    const uint32_t n_nodes = rd_u32(&r);
    const uint32_t n_inputs = rd_u32(&r);
    const uint32_t n_outputs = rd_u32(&r);
    MCU_REQUIRE(!r.bad && n_inputs + n_outputs >= 2u && n_inputs < 256u && n_outputs < 256u,
                MCU_ERR_DELEGATE_PAYLOAD);
    MCU_REQUIRE(xnn_initialize(NULL) == xnn_status_success, MCU_ERR_DELEGATE_FAILED);

    xp_handle *h = (xp_handle *)calloc(1, sizeof *h);
    MCU_REQUIRE(h != NULL, MCU_ERR_BUFFER_TOO_SMALL);
    h->n_inputs = n_inputs;
    h->n_outputs = n_outputs;
    h->boundary_bytes = (uint32_t *)calloc(n_inputs + n_outputs, sizeof *h->boundary_bytes);
    h->externals = (struct xnn_external_value *)calloc(n_inputs + n_outputs, sizeof *h->externals);
    xnn_subgraph_t sg = NULL;
    mcu_status st = MCU_ERR_BUFFER_TOO_SMALL;
    if (h->boundary_bytes != NULL && h->externals != NULL) {
        st = xnn_create_subgraph(n_inputs + n_outputs, 0, &sg) == xnn_status_success ? MCU_OK
                                                                                      : MCU_ERR_DELEGATE_FAILED;
    }
    if (st == MCU_OK) {
        st = build(&r, sg, h, n_values, n_nodes);
    }
    if (sg != NULL) {
        xnn_delete_subgraph(sg); /* the runtime no longer needs it */
    }
    if (st != MCU_OK) {
        xp_free(h);
        return st;
    }
    *handle = h;
    return MCU_OK;
}

static mcu_status xp_execute(void *handle, void *const *tensors, const uint32_t *tensor_bytes, uint32_t n_inputs,
                             uint32_t n_outputs)
{
    xp_handle *h = (xp_handle *)handle;
    MCU_REQUIRE(n_inputs == h->n_inputs && n_outputs == h->n_outputs, MCU_ERR_INVALID_ARG);
    for (uint32_t i = 0; i < n_inputs + n_outputs; ++i) {
        MCU_REQUIRE(tensors[i] != NULL, MCU_ERR_NULL_POINTER);
        MCU_REQUIRE(tensor_bytes[i] == h->boundary_bytes[i], MCU_ERR_SHAPE);
        h->externals[i].data = tensors[i];
    }
    MCU_REQUIRE(xnn_setup_runtime(h->runtime, n_inputs + n_outputs, h->externals) == xnn_status_success,
                MCU_ERR_DELEGATE_FAILED);
    MCU_REQUIRE(xnn_invoke_runtime(h->runtime) == xnn_status_success, MCU_ERR_DELEGATE_FAILED);
    return MCU_OK;
}

static void xp_destroy(void *handle)
{
    xp_free((xp_handle *)handle);
}

const mcu_delegate_backend mcu_xnnpack_backend = {
    "xnnpack", {'X', 'N', 'N', 'P'}, XP_VERSION, xp_init, xp_execute, xp_destroy,
};
MCU_DELEGATE_REGISTER(mcu_xnnpack_backend);
