#!/usr/bin/env python3
# Host check of templates/attention/attention_sm80.cuh index math (no GPU): simulates one warp's
# Q·Kᵀ and P·V with the PTX semantics of ldmatrix (.trans) and mma.m16n8k16 over the XOR-swizzled
# tiles, compares with numpy, checks ldmatrix bank groups and the prmt fp8 decode.
# Run: .venv/bin/python tools/attention_sm80_sim.py
import numpy as np
rng=np.random.default_rng(0)
D=128; BN=32; KEYS=64; WNOFF=32  # warp column 1 of 2
def swz(row,chunk): return row*(D*2)+((chunk^(row&7))<<4)
def store_tile(mat):  # mat [rows][D] fp16 -> bytes dict offset->value per half
    buf=np.zeros(mat.shape[0]*D,dtype=np.float64)
    for r in range(mat.shape[0]):
        for c in range(D//8):
            off=swz(r,c)//2
            buf[off:off+8]=mat[r,c*8:c*8+8]
    return buf
def ldmatrix(buf,addrs,trans=False):
    # addrs[lane] byte address of row (lane%8) of matrix lane//8; returns regs[lane][i] = (lo,hi)
    regs=[[None]*4 for _ in range(32)]
    for i in range(4):
        M=np.array([buf[addrs[8*i+r]//2:addrs[8*i+r]//2+8] for r in range(8)])
        for T in range(32):
            if not trans: regs[T][i]=(M[T//4,2*(T%4)],M[T//4,2*(T%4)+1])
            else: regs[T][i]=(M[2*(T%4),T//4],M[2*(T%4)+1,T//4])
    return regs
def mma(acc,a,b0,b1):
    # acc[lane][4], a[lane][4] pairs, b pairs -> A 16x16, B 16x8 reconstruct
    A=np.zeros((16,16));B=np.zeros((16,8))
    for T in range(32):
        g,t=T//4,T%4
        A[g,2*t:2*t+2]=a[T][0];A[g+8,2*t:2*t+2]=a[T][1];A[g,2*t+8:2*t+10]=a[T][2];A[g+8,2*t+8:2*t+10]=a[T][3]
        B[2*t:2*t+2,g]=b0[T];B[2*t+8:2*t+10,g]=b1[T]
    C=A@B
    for T in range(32):
        g,t=T//4,T%4
        acc[T][0]+=C[g,2*t];acc[T][1]+=C[g,2*t+1];acc[T][2]+=C[g+8,2*t];acc[T][3]+=C[g+8,2*t+1]
BM=32; wm=1
Q=rng.standard_normal((BM,D)).round(2);K=rng.standard_normal((KEYS,D)).round(2);V=rng.standard_normal((KEYS,D)).round(2)
qb=store_tile(Q);kb=store_tile(K);vb=store_tile(V)
lanes=range(32)
a_row=[wm*16+(l//8%2)*8+l%8 for l in lanes];a_chunk=[l//16 for l in lanes]
bk_key=[(l//16)*8+l%8 for l in lanes];bk_chunk=[l//8%2 for l in lanes]
bv_key=[(l//8%2)*8+l%8 for l in lanes];bv_chunk=[l//16 for l in lanes]
s=[[[0.]*4 for _ in range(32)] for n in range(BN//8)]
for kk in range(D//16):
    a=ldmatrix(qb,[swz(a_row[l],2*kk+a_chunk[l]) for l in lanes])
    for np_ in range(BN//16):
        bk=ldmatrix(kb,[swz(WNOFF+16*np_+bk_key[l],2*kk+bk_chunk[l]) for l in lanes])
        mma(s[2*np_],a,[bk[T][0] for T in lanes],[bk[T][1] for T in lanes])
        mma(s[2*np_+1],a,[bk[T][2] for T in lanes],[bk[T][3] for T in lanes])
S=Q[wm*16:wm*16+16]@K[WNOFF:WNOFF+BN].T
err=0
for n in range(BN//8):
    for T in lanes:
        g,t=T//4,T%4
        for e in range(4):
            err=max(err,abs(s[n][T][e]-S[g+8*(e//2),n*8+2*t+e%2]))
print("QK err",err)
# PV with P = S (as given)
o=[[[0.]*4 for _ in range(32)] for n in range(D//8)]
for j in range(BN//16):
    p=[((s[2*j][T][0],s[2*j][T][1]),(s[2*j][T][2],s[2*j][T][3]),(s[2*j+1][T][0],s[2*j+1][T][1]),(s[2*j+1][T][2],s[2*j+1][T][3])) for T in lanes]
    for dp in range(D//16):
        bv=ldmatrix(vb,[swz(WNOFF+16*j+bv_key[l],2*dp+bv_chunk[l]) for l in lanes],trans=True)
        mma(o[2*dp],p,[bv[T][0] for T in lanes],[bv[T][1] for T in lanes])
        mma(o[2*dp+1],p,[bv[T][2] for T in lanes],[bv[T][3] for T in lanes])
O=S@V[WNOFF:WNOFF+BN]
err=0
for n in range(D//8):
    for T in lanes:
        g,t=T//4,T%4
        for e in range(4):
            err=max(err,abs(o[n][T][e]-O[g+8*(e//2),n*8+2*t+e%2]))
print("PV err",err)
# bank conflicts: ldmatrix matrix rows -> 16B bank groups distinct
for kk in range(D//16):
  for i in range(4):
    ad=[swz(WNOFF+bk_key[l],2*kk+bk_chunk[l]) for l in range(8*i,8*i+8)]
    assert len(set((x//16)%8 for x in ad))==8
    ad=[swz(bv_key[l],2*kk+bv_chunk[l]) for l in range(8*i,8*i+8)]
    assert len(set((x//16)%8 for x in ad))==8
print("no ldmatrix bank conflicts")
# fp8 decode check
def prmt(w,sel):
    bs=[(w>>(8*i))&255 for i in range(4)]+[0]*4
    return sum(bs[(sel>>(4*i))&7]<<(8*i) for i in range(4))
def e4m3(b): return ((b&0x7F)<<7)|((b&0x80)<<8)
for w in [0x01234567,0x89ABCDEF,0xFF7F8000,0x12FE80C3]:
    lo=prmt(w,0x1404);hi=prmt(w,0x3424)
    c=[(w>>(8*i))&255 for i in range(4)]
    assert lo==(c[0]<<8)|(c[1]<<24) and hi==(c[2]<<8)|(c[3]<<24)
    f=lambda x:(x&0x80008000)|((x>>1)&0x3F803F80)
    assert f(lo)==e4m3(c[0])|(e4m3(c[1])<<16) and f(hi)==e4m3(c[2])|(e4m3(c[3])<<16), hex(w)
print("fp8 ok")
