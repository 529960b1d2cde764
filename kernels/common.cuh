// Definitions shared by voxpipe's kernels. The network is specified in segment/model.go.
//
// Layouts (x fastest everywhere):
//   input slab   [plane][ny][nx]           int16 or float32 stored values
//   e, s, g      [VP_C][planes][ny][nx]    float32, channel stride = planes*ny*nx
//   labels       [plane][ny][nx]           uint8
// Models with fewer channels or classes are zero-padded to VP_C / VP_MAXK on upload, which
// leaves every label unchanged (the padded channels are exactly 0 and get weight 0).
#ifndef VOXPIPE_COMMON_CUH
#define VOXPIPE_COMMON_CUH

#define VP_C 16    // channels the kernels compute (the network's C, padded)
#define VP_GATE 8  // attention-gate width, VP_C/2
#define VP_MAXK 16 // most classes the head supports

// Output tile of the 3x3x3 stencil kernels: one warp spans x, VP_TY warps span y, and every
// thread keeps VP_TZ consecutive z-planes of all VP_C channels in registers.
#define VP_TX 32
#define VP_TY 8
#define VP_TZ 4
#define VP_THREADS (VP_TX * VP_TY)

#endif
