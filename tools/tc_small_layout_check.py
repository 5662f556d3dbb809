#!/usr/bin/env python3
# Host emulation of templates/gemm/tc_small.cuh's index math, lane by lane, with the PTX ISA's
# mma.m16n8k16 fragment layouts (A 16×16 row: a0/a2 rows g, a1/a3 rows g+8, a0/a1 k 2t..2t+1,
# a2/a3 k 2t+8..; B 16×8 col: b0 k 2t..2t+1, b1 k 2t+8.., column g; D: d0/d1 row g, d2/d3 row
# g+8, columns 2t, 2t+1). Integer weights and x make every sum exact, so any mapping error
# (k permutation, token or row placement, tail chunks, silu_mul pairing, cross-warp split)
# shows as a non-zero difference. Needs numpy: .venv/bin/python tools/tc_small_layout_check.py
import sys

import numpy as np


def tile_weight_row(N, gated, n0, r):
    if gated:
        o = min(n0 + (r//32)*16 + r%16, N//2-1)
        return o if (r//16)%2==0 else o + N//2
    return min(n0 + r, N-1)
def run(N, K, kPer, MT, ROWS, WARPS, gated, m, rng):
    W = rng.integers(-8, 8, size=(N, K)).astype(np.float64)
    x = rng.integers(-4, 4, size=(m, K)).astype(np.float64)
    kChunks = K//kPer; kBlocks = (kChunks+3)//4
    outN = N//2 if gated else N
    kTiles = (2*ROWS if gated else ROWS)//16; kTG = MT//8
    y = np.full((m, outN), np.nan)
    for bx in range((outN+ROWS-1)//ROWS):
        for by in range((m+MT-1)//MT):
            n0, m0 = bx*ROWS, by*MT
            partial = np.zeros((WARPS, kTiles*kTG*4, 32))
            for warp in range(WARPS):
                acc = np.zeros((kTiles, kTG, 4, 32))
                for kb in range(warp, kBlocks, WARPS):
                    for i in range(kTiles):
                        for h in range(kTG):
                            # assemble per-lane fragments, then do the mma as matrices
                            A = np.zeros((16,16)); B = np.zeros((16,8))
                            for j in range(kPer//4):
                                A = np.zeros((16,16)); B = np.zeros((16,8))
                                for lane in range(32):
                                    g, t = lane//4, lane%4
                                    c = kb*4+t; inn = c < kChunks; cc = c if inn else kChunks-1
                                    rows = [tile_weight_row(N, gated, n0, i*16+g+8*hh) for hh in range(2)]
                                    def wpair(row, p):
                                        if not inn: return (0.0, 0.0)
                                        k = cc*kPer + 2*p; return (W[row][k], W[row][k+1])
                                    lo2j, hi2j = wpair(rows[0], 2*j), wpair(rows[1], 2*j)
                                    lo2j1, hi2j1 = wpair(rows[0], 2*j+1), wpair(rows[1], 2*j+1)
                                    tok = m0 + h*8 + g
                                    def xword(wi):  # words of the x run of the chunk: word wi = k cc*kPer + 2wi, +1
                                        if not inn or tok >= m: return (0.0, 0.0)
                                        k = cc*kPer + 2*wi; return (x[tok][k], x[tok][k+1])
                                    b0, b1 = xword(2*j), xword(2*j+1)
                                    # PTX layouts
                                    A[g][2*t], A[g][2*t+1] = lo2j
                                    A[g+8][2*t], A[g+8][2*t+1] = hi2j
                                    A[g][2*t+8], A[g][2*t+9] = lo2j1
                                    A[g+8][2*t+8], A[g+8][2*t+9] = hi2j1
                                    B[2*t][g], B[2*t+1][g] = b0
                                    B[2*t+8][g], B[2*t+9][g] = b1
                                D = A @ B
                                for lane in range(32):
                                    g, t = lane//4, lane%4
                                    acc[i][h][0][lane] += D[g][2*t]; acc[i][h][1][lane] += D[g][2*t+1]
                                    acc[i][h][2][lane] += D[g+8][2*t]; acc[i][h][3][lane] += D[g+8][2*t+1]
                for i in range(kTiles):
                    for h in range(kTG):
                        for e in range(4): partial[warp][(i*kTG+h)*4+e] = acc[i][h][e]
            for idx in range(kTiles*kTG*4*32):
                a, ln = idx//32, idx%32
                i, h, e = a//(kTG*4), (a//4)%kTG, a%4
                if gated and i%2==1: continue
                r = ln//4 + 8*(e//2); tok = m0 + h*8 + 2*(ln%4) + e%2
                n = n0 + (i//2)*16 + r if gated else n0 + i*16 + r
                if tok >= m or n >= outN: continue
                v = partial[:, a, ln].sum()
                if gated:
                    up = partial[:, a + kTG*4, ln].sum(); v = ('g', v, up)
                assert np.isnan(y[tok][n]) if not gated else True
                y[tok][n] = v if not gated else v[1]*1000003 + v[2]
    ref = x @ W.T
    if gated: ref = ref[:, :outN]*1000003 + ref[:, outN:]
    assert not np.isnan(y).any(), "unwritten outputs"
    err = np.abs(y-ref).max()
    return err
rng = np.random.default_rng(1)
for (N,K,kPer,MT,ROWS,WARPS,gated,m) in [(40,96,8,8,16,2,False,3),(33,1040//8*8,16,16,32,4,False,13),(36,160,32,16,16,2,True,11),
                                          (50,96,32,8,32,1,False,8),(20,80,16,16,16,2,True,16),(17,64,8,8,16,2,False,20)]:
    if K % kPer: continue
    err = run(N,K,kPer,MT,ROWS,WARPS,gated,m,rng)
    print(N,K,kPer,MT,ROWS,WARPS,gated,m, "maxerr", err); sys.stdout.flush()
    if err != 0: sys.exit(1)
