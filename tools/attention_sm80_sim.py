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
def frag_err(acc,ref,col=lambda n,t,e: n*8+2*t+e%2):
    # largest |acc - ref| over accumulator tiles acc[n][lane][e]: element e of lane T is row
    # T//4 + 8·(e//2) of ref and column col(n, T%4, e) (the m16n8 layout by default)
    return max(abs(acc[n][T][e]-ref[T//4+8*(e//2),col(n,T%4,e)]) for n in range(len(acc)) for T in range(32) for e in range(4))
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
print("QK err",frag_err(s,S))
# PV with P = S (as given)
o=[[[0.]*4 for _ in range(32)] for n in range(D//8)]
for j in range(BN//16):
    p=[((s[2*j][T][0],s[2*j][T][1]),(s[2*j][T][2],s[2*j][T][3]),(s[2*j+1][T][0],s[2*j+1][T][1]),(s[2*j+1][T][2],s[2*j+1][T][3])) for T in lanes]
    for dp in range(D//16):
        bv=ldmatrix(vb,[swz(WNOFF+16*j+bv_key[l],2*dp+bv_chunk[l]) for l in lanes],trans=True)
        mma(o[2*dp],p,[bv[T][0] for T in lanes],[bv[T][1] for T in lanes])
        mma(o[2*dp+1],p,[bv[T][2] for T in lanes],[bv[T][3] for T in lanes])
O=S@V[WNOFF:WNOFF+BN]
print("PV err",frag_err(o,O))
# bank conflicts: ldmatrix matrix rows -> 16B bank groups distinct
for kk in range(D//16):
  for i in range(4):
    ad=[swz(WNOFF+bk_key[l],2*kk+bk_chunk[l]) for l in range(8*i,8*i+8)]
    assert len(set((x//16)%8 for x in ad))==8
    ad=[swz(bv_key[l],2*kk+bv_chunk[l]) for l in range(8*i,8*i+8)]
    assert len(set((x//16)%8 for x in ad))==8
print("no ldmatrix bank conflicts")
# fp8 decode check
# The kernel's fp8 -> fp16x2 conversions (kv_format.cuh): prmt with its sign mode (selector
# bit 3 replicates the chosen byte's sign), then for E4M3 one shift and one AND.
def prmt2(a,b,sel):
    bs=[(a>>(8*i))&255 for i in range(4)]+[(b>>(8*i))&255 for i in range(4)]
    out=0
    for i in range(4):
        n=(sel>>(4*i))&15; v=bs[n&7]
        if n&8: v=255 if v&128 else 0
        out|=v<<(8*i)
    return out
def fp8x4(w,kv):
    if kv=='e4m3': return (prmt2(w,0,0x9180)<<7)&0xBF80BF80,(prmt2(w,0,0xB3A2)<<7)&0xBF80BF80
    return prmt2(w,0,0x1404),prmt2(w,0,0x3424)
def fp8_pair(a,b,k,kv):
    if kv=='e4m3': return (prmt2(a,b,k|(8|k)<<4|(4+k)<<8|(12+k)<<12)<<7)&0xBF80BF80
    return prmt2(a,b,k*0x11|(k+4)*0x1100)&0xFF00FF00
def e4m3(b): return ((b&0x7F)<<7)|((b&0x80)<<8)
for w in [0x01234567,0x89ABCDEF,0xFF7F8000,0x12FE80C3]+[c*0x01010101^0x00FF8000 for c in range(256)]:
    c=[(w>>(8*i))&255 for i in range(4)]
    lo,hi=fp8x4(w,'e4m3')
    assert lo==e4m3(c[0])|(e4m3(c[1])<<16) and hi==e4m3(c[2])|(e4m3(c[3])<<16), hex(w)
    lo,hi=fp8x4(w,'e5m2')
    assert lo==(c[0]<<8)|(c[1]<<24) and hi==(c[2]<<8)|(c[3]<<24), hex(w)
    for k in range(4):
        b=w^0x5A3C96F0; cb=(b>>(8*k))&255
        assert fp8_pair(w,b,k,'e4m3')==e4m3(c[k])|(e4m3(cb)<<16), hex(w)
print("fp8 ok")

# fp8 stages read straight into fragments (BM = 16, attention_sm80.cuh kDirect): Q·Kᵀ over the
# permuted d, P·V over permuted output columns, from raw stages laid out by attn_fp8_k_at /
# attn_fp8_v_at; the codes go through the same prmt/mask ops as the kernel; bank conflicts of
# every shared load (128-bit: 4 phases of 8 lanes, 64-bit: 2 of 16, 32-bit: 1 of 32).
def half_val(h):
    s=-1. if h&0x8000 else 1.; e=(h>>10)&31; m=h&1023
    return s*(m/1024*2.**-14 if e==0 else (1+m/1024)*2.**(e-15))
def dec_word(x):  # fp16x2 bits -> (lo, hi) values
    return half_val(x&0xFFFF),half_val(x>>16)
def code_val(c,kv): return half_val(e4m3(c) if kv=='e4m3' else c<<8)
def k_at(Dd,key,ch): return key*Dd+((ch^(((key&1)<<2) if Dd==128 else 0))<<4)
def v_at(Dd,key,ch): return key*Dd+((ch^((key&6) if Dd==128 else 0))<<4)
def conflicts(addrs,width):  # addrs per lane (byte), width bytes per lane -> worst wavefronts in a phase
    per=128//width; worst=1
    for ph in range(0,32,per):
        banks={}
        for a in addrs[ph:ph+per]:
            for w in range(a//4,(a+width)//4): banks.setdefault(w%32,set()).add(w)
        worst=max(worst,max(len(v) for v in banks.values()))
    return worst
def word(buf,off): return int.from_bytes(bytes(buf[off:off+4]),'little')
for kv in ('e4m3','e5m2'):
  for Dd in (64,128):
    for BNd,WN_,wn in ((16,2,1),(32,2,1),(16,1,0)):
        KEYS_=WN_*BNd; r0=wn*BNd
        codes=lambda shape: rng.integers(0,256,shape)
        Kc=codes((KEYS_,Dd)); Vc=codes((KEYS_,Dd))
        for c in (0x7F,0xFF,0x7C,0xFC): Kc[Kc==c]=0; Vc[Vc==c]=0  # no NaN/inf codes
        Kf=np.vectorize(lambda c:code_val(c,kv))(Kc); Vf=np.vectorize(lambda c:code_val(c,kv))(Vc)
        Qd=rng.standard_normal((16,Dd)).round(2)
        kst=bytearray(KEYS_*Dd); vst=bytearray(KEYS_*Dd)
        for key in range(KEYS_):
            for ch in range(Dd//16):
                kst[k_at(Dd,key,ch):k_at(Dd,key,ch)+16]=bytes(int(x) for x in Kc[key,16*ch:16*ch+16])
                vst[v_at(Dd,key,ch):v_at(Dd,key,ch)+16]=bytes(int(x) for x in Vc[key,16*ch:16*ch+16])
        def qfrag(kk,T):
            g,t=T//4,T%4; d=64*(kk//4)+16*t+4*(kk%4)
            return ((Qd[g,d],Qd[g,d+1]),(Qd[g+8,d],Qd[g+8,d+1]),(Qd[g,d+2],Qd[g,d+3]),(Qd[g+8,d+2],Qd[g+8,d+3]))
        s=[[[0.]*4 for _ in range(32)] for n in range(BNd//8)]
        for h in range(Dd//64):
            for n in range(BNd//8):
                addrs=[k_at(Dd,r0+8*n+T//4,4*h+T%4) for T in lanes]
                assert conflicts(addrs,16)==1,(kv,Dd,BNd,'K')
                for i in range(4):
                    kk=4*h+i; a=[qfrag(kk,T) for T in lanes]
                    b0=[];b1=[]
                    for T in lanes:
                        w=word(kst,addrs[T]+4*i)
                        lo,hi=fp8x4(w,kv)
                        b0.append(dec_word(lo));b1.append(dec_word(hi))
                    mma(s[n],a,b0,b1)
        S=Qd@Kf[r0:r0+BNd].T
        err=frag_err(s,S)
        assert err<1e-9,(kv,Dd,BNd,'QK',err)
        o=[[[0.]*4 for _ in range(32)] for n in range(Dd//8)]
        vb=Dd//8
        for j in range(BNd//16):
            p=[((s[2*j][T][0],s[2*j][T][1]),(s[2*j][T][2],s[2*j][T][3]),(s[2*j+1][T][0],s[2*j+1][T][1]),(s[2*j+1][T][2],s[2*j+1][T][3])) for T in lanes]
            rows=[]
            for rr in range(4):
                keys=[r0+16*j+2*(T%4)+rr%2+8*(rr//2) for T in lanes]
                if Dd==64:
                    addrs=[keys[T]*Dd+8*(T//4) for T in lanes]
                    assert conflicts(addrs,8)<=4,(kv,Dd,'V64')
                    rows.append([[word(vst,addrs[T]+4*w) for w in range(2)] for T in lanes])
                else:
                    addrs=[v_at(Dd,keys[T],T//4) for T in lanes]
                    assert conflicts(addrs,16)==1,(kv,Dd,BNd,'V',rr)
                    rows.append([[word(vst,addrs[T]+4*w) for w in range(4)] for T in lanes])
            for w in range(Dd//32):
                for k in range(4):
                    b0=[dec_word(fp8_pair(rows[0][T][w],rows[1][T][w],k,kv)) for T in lanes]
                    b1=[dec_word(fp8_pair(rows[2][T][w],rows[3][T][w],k,kv)) for T in lanes]
                    mma(o[4*w+k],p,b0,b1)
        O=S@Vf[r0:r0+BNd]
        # the kernel's store: column 2·tig + e of d-tile n is d = (2·tig + e%2)·D/8 + n
        err=frag_err(o,O,lambda n,t,e: (2*t+e%2)*(Dd//8)+n)
        assert err<1e-6*max(1,abs(O).max()),(kv,Dd,BNd,'PV',err)
    # the cp.async writes: a thread's 16-byte chunk (key, part) of each stage, 8 lanes a phase
    for Dd in (64,128):
        for f in (k_at,v_at):
            addrs=[f(Dd,c//(Dd//16),c%(Dd//16)) for c in range(32)]
            assert conflicts(addrs,16)==1,(Dd,f.__name__,'cp.async')
print("fp8 direct fragments ok (QK, PV, bank conflicts)")
