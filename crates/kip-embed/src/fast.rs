//! Short texts: the same encoder as [`crate::bert`], laid out for the case a SEARCH
//! waits on (one query of a few words).
//!
//! Why a second path: for one short text the arithmetic is small (a 7-token query is
//! ~150 MFLOP) but every weight matrix must be read once, and through candle each of
//! the ~120 operations of a forward pass goes to its thread pool and each matrix
//! product packs its operand first: a profile of a 3-word query showed 62% of the time
//! in the product kernels and their packing and 25% in waking and parking threads, for
//! 6.5 ms on this machine's two cores. Here the weights of the dense layers are stored
//! once, at load time, as IEEE half floats in the layout the products read them in
//! (row per output), so a query streams 21 MB instead of 42 MB and no operand is copied
//! (back-to-back queries find them in a 32 MiB last-level cache; a search in between
//! evicts them, which is most of what a query embedding costs inside a server:
//! docs/performance-history.md, "Session 20"). Each row
//! is widened back to `f32` before use and every sum is computed in `f32`, so the
//! vectors stay within rounding of the reference implementation (golden test: cosine
//! >= 0.999; against the candle path, tests in this crate: >= 0.9999).
//!
//! The rest of a layer (attention, softmax, layer norms, GELU) is compiled per
//! instruction set too, with sums kept in eight lanes and `exp`/`erf` written without
//! library calls, so that it vectorizes: scalar, it was a third of a query's time
//! (libm's `erff` alone 16%); a 3-word query went from 2.6 to 1.6-1.9 ms, a paragraph
//! from 19.3 to 12.8 ms (embed_bench, docs/performance-history.md "Session 21").
//!
//! Batches (the background worker's embeddings) take this path too for their texts of
//! at most 64 tokens, several texts per forward pass (their rows side by side in every
//! product, attention within each text, no padding): 200 -> 250-260 texts/s on this
//! machine. Longer texts go through candle, padded per batch.
//!
//! One file (about 800 lines, a quarter of them tests): the weight layout, the kernels
//! that read it and the tests that pin their arithmetic to a plain loop are read
//! together; split, each part would only make sense with the others open beside it.

use crate::bert::{Act, Bert};
use candle_core::Tensor;
use half::f16;

/// Output rows computed together: their weights are widened into one scratch block and
/// each input row is read once for all of them.
const ROWS: usize = 4;

/// A dense layer `y = x W^T + b` with `W` as half floats, one row per output.
struct Dense {
    /// The bits of each weight as an IEEE half float.
    w: Vec<u16>,
    b: Vec<f32>,
    outputs: usize,
    inputs: usize,
}

/// A layer normalization's gain, bias and epsilon.
struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

struct Layer {
    /// Query, key and value projections stacked: `3 * hidden` outputs.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// The encoder's weights in the single-text layout.
pub(crate) struct Fast {
    words: Tensor,
    /// Position embeddings plus the token-type-0 embedding, `max_positions * hidden`.
    positions: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    act: Act,
}

fn to_vec(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    t.flatten_all()?.to_vec1::<f32>()
}

fn dense(l: &candle_nn::Linear) -> candle_core::Result<Dense> {
    let (outputs, inputs) = l.weight().dims2()?;
    let w: Vec<f32> = to_vec(l.weight())?;
    let b = match l.bias() {
        Some(b) => to_vec(b)?,
        None => vec![0.0; outputs],
    };
    Ok(Dense {
        w: w.iter().map(|&x| f16::from_f32(x).to_bits()).collect(),
        b,
        outputs,
        inputs,
    })
}

fn stacked(parts: &[&candle_nn::Linear]) -> candle_core::Result<Dense> {
    let mut all = Dense {
        w: Vec::new(),
        b: Vec::new(),
        outputs: 0,
        inputs: 0,
    };
    for p in parts {
        let d = dense(p)?;
        all.inputs = d.inputs;
        all.outputs += d.outputs;
        all.w.extend(d.w);
        all.b.extend(d.b);
    }
    Ok(all)
}

fn norm(n: &candle_nn::LayerNorm) -> candle_core::Result<Norm> {
    let gain = to_vec(n.weight())?;
    let bias = match n.bias() {
        Some(b) => to_vec(b)?,
        None => vec![0.0; gain.len()],
    };
    Ok(Norm {
        gain,
        bias,
        eps: n.eps() as f32,
    })
}

impl Fast {
    /// The single-text layout of a loaded encoder's weights. `None` when a weight is
    /// outside the half-float range (|w| > 65504 or not finite), which would not
    /// round-trip: such a model is served by the candle path alone.
    pub(crate) fn from_bert(bert: &Bert) -> candle_core::Result<Option<Fast>> {
        let hidden = bert.hidden;
        let mut layers = Vec::with_capacity(bert.layers.len());
        for l in &bert.layers {
            let a = &l.attention;
            layers.push(Layer {
                qkv: stacked(&[&a.query, &a.key, &a.value])?,
                attention_out: dense(&l.attention_out)?,
                attention_norm: norm(&l.attention_norm)?,
                intermediate: dense(&l.intermediate)?,
                output: dense(&l.output)?,
                output_norm: norm(&l.output_norm)?,
            });
        }
        let all_fit = layers.iter().all(|l| {
            [&l.qkv, &l.attention_out, &l.intermediate, &l.output]
                .iter()
                .all(|d| d.w.iter().all(|&x| f16::from_bits(x).is_finite()))
        });
        if !all_fit {
            return Ok(None);
        }
        let mut positions = to_vec(bert.positions.embeddings())?;
        let type0 = to_vec(&bert.token_types.embeddings().get(0)?)?;
        for row in positions.chunks_exact_mut(hidden) {
            for (p, t) in row.iter_mut().zip(&type0) {
                *p += t;
            }
        }
        Ok(Some(Fast {
            words: bert.words.embeddings().clone(),
            positions,
            norm: norm(&bert.norm)?,
            layers,
            hidden,
            heads: bert.heads,
            act: bert.act,
        }))
    }

    /// The last hidden states (row per token, `hidden` wide) of the sequences of token
    /// ids `seqs` (no padding; each at most the model's maximum positions), one after
    /// the other: every dense layer takes the rows of all of them at once, attention
    /// stays within each sequence.
    ///
    /// Runs on a worker of the thread pool (`rayon::scope` executes its body on one):
    /// from there, each product's second half is handed to the other worker, which is
    /// still spinning from the previous product, instead of waking two pool threads
    /// from sleep while the calling thread blocks, 24 times per call.
    pub(crate) fn forward(&self, seqs: &[&[u32]]) -> candle_core::Result<Vec<f32>> {
        rayon::scope(|_| self.forward_here(seqs))
    }

    fn forward_here(&self, seqs: &[&[u32]]) -> candle_core::Result<Vec<f32>> {
        let h = self.hidden;
        let ids: Vec<u32> = seqs.iter().flat_map(|s| s.iter().copied()).collect();
        let m = ids.len();
        let idx = Tensor::from_slice(&ids, m, self.words.device())?;
        let mut x = to_vec(&self.words.index_select(&idx, 0)?)?;
        let mut spans = Vec::with_capacity(seqs.len());
        let mut at = 0;
        for seq in seqs {
            spans.push(at..at + seq.len());
            let rows = x[at * h..(at + seq.len()) * h].chunks_exact_mut(h);
            for (row, pos) in rows.zip(self.positions.chunks_exact(h)) {
                for (v, p) in row.iter_mut().zip(pos) {
                    *v += p;
                }
            }
            at += seq.len();
        }
        layer_norm(&mut x, &self.norm);
        let mut scratch = Scratch::default();
        for layer in &self.layers {
            self.layer(layer, &mut x, m, &spans, &mut scratch);
        }
        Ok(x)
    }

    fn layer(
        &self,
        l: &Layer,
        x: &mut [f32],
        m: usize,
        spans: &[std::ops::Range<usize>],
        s: &mut Scratch,
    ) {
        let h = self.hidden;
        apply(&l.qkv, x, m, &mut s.qkv, &mut s.halves, None);
        attend(&s.qkv, spans, h, self.heads, &mut s.context, &mut s.scores);
        apply(
            &l.attention_out,
            &s.context,
            m,
            &mut s.out,
            &mut s.halves,
            None,
        );
        for (o, v) in s.out.iter_mut().zip(x.iter()) {
            *o += v;
        }
        layer_norm(&mut s.out, &l.attention_norm);
        apply(
            &l.intermediate,
            &s.out,
            m,
            &mut s.inner,
            &mut s.halves,
            Some(self.act),
        );
        apply(&l.output, &s.inner, m, &mut s.down, &mut s.halves, None);
        for ((d, o), v) in s.down.iter().zip(&s.out).zip(x.iter_mut()) {
            *v = d + o;
        }
        layer_norm(x, &l.output_norm);
    }
}

/// Buffers reused from layer to layer.
#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    scores: Vec<f32>,
    out: Vec<f32>,
    inner: Vec<f32>,
    down: Vec<f32>,
    halves: Halves,
}

/// `y = act(x W^T + b)` for the `m` rows of `x`. The outputs are split in two halves
/// computed at the same time on the thread pool when it has more than one thread (a
/// query has no other work for the second core); each half applies the activation to
/// its own outputs.
fn apply(d: &Dense, x: &[f32], m: usize, y: &mut Vec<f32>, s: &mut Halves, act: Option<Act>) {
    let n = d.outputs;
    let split = if rayon::current_num_threads() > 1 && n >= 4 * ROWS {
        (n / 2).next_multiple_of(ROWS)
    } else {
        n
    };
    let Halves {
        low,
        high,
        block_low,
        block_high,
    } = s;
    if split < n {
        rayon::join(
            || part(d, x, m, 0..split, low, block_low, act),
            || part(d, x, m, split..n, high, block_high, act),
        );
    } else {
        part(d, x, m, 0..n, low, block_low, act);
        high.clear();
    }
    y.clear();
    y.reserve(m * n);
    let (wl, wh) = (split, n - split);
    for i in 0..m {
        y.extend_from_slice(&low[i * wl..(i + 1) * wl]);
        y.extend_from_slice(&high[i * wh..(i + 1) * wh]);
    }
}

/// Two output buffers and two weight blocks, one per half of a product.
#[derive(Default)]
struct Halves {
    low: Vec<f32>,
    high: Vec<f32>,
    block_low: Vec<f32>,
    block_high: Vec<f32>,
}

/// Outputs `outs` of `y = x W^T + b` (row per input row, `outs.len()` wide), with the
/// instruction set `pulp` finds (AVX2 and FMA where present), then the activation.
fn part(
    d: &Dense,
    x: &[f32],
    m: usize,
    outs: std::ops::Range<usize>,
    y: &mut Vec<f32>,
    block: &mut Vec<f32>,
    act: Option<Act>,
) {
    pulp::Arch::new().dispatch(Product {
        d,
        x,
        m,
        outs,
        y,
        block,
        act,
    });
}

/// One [`part`]'s product, compiled per instruction set by `pulp`.
struct Product<'a> {
    d: &'a Dense,
    x: &'a [f32],
    m: usize,
    outs: std::ops::Range<usize>,
    y: &'a mut Vec<f32>,
    /// Scratch: [`ROWS`] weight rows widened to `f32`.
    block: &'a mut Vec<f32>,
    act: Option<Act>,
}

impl pulp::WithSimd for Product<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Product {
            d,
            x,
            m,
            outs,
            y,
            block,
            act,
        } = self;
        let k = d.inputs;
        let width = outs.len();
        y.clear();
        y.resize(m * width, 0.0);
        block.resize(ROWS * k, 0.0);
        let x = &x[..m * k];
        let mut j = outs.start;
        while j < outs.end {
            let rows = ROWS.min(outs.end - j);
            let at = j * k;
            widen(&d.w[at..at + rows * k], &mut block[..rows * k]);
            let bias = &d.b[j..j + rows];
            let col = j - outs.start;
            let mut put = |i: usize, s: [f32; ROWS]| {
                for (r, o) in y[i * width + col..i * width + col + rows]
                    .iter_mut()
                    .enumerate()
                {
                    *o = s[r] + bias[r];
                }
            };
            let w = &block[..ROWS * k];
            let mut pairs = x.chunks_exact(2 * k);
            let mut i = 0;
            for two in pairs.by_ref() {
                let (s0, s1) = dots(simd, &two[..k], &two[k..], w, k);
                put(i, s0);
                put(i + 1, s1);
                i += 2;
            }
            let last = pairs.remainder();
            if !last.is_empty() {
                let (s0, _) = dots(simd, last, last, w, k);
                put(i, s0);
            }
            j += rows;
        }
        if let Some(act) = act {
            activate(y, act);
        }
    }
}

/// Half floats (their bits) to `f32`, written so that it vectorizes: the exponent and
/// mantissa are moved into place and the exponent rebased by one multiplication, which
/// also turns half-float subnormals into the right normal `f32` (weights are checked
/// finite at load, so infinities and NaNs never reach this).
#[inline(always)]
fn widen(from: &[u16], to: &mut [f32]) {
    const REBASE: f32 = (1u128 << 112) as f32;
    for (t, &h) in to.iter_mut().zip(from) {
        let bits = u32::from(h);
        let magnitude = f32::from_bits((bits & 0x7fff) << 13) * REBASE;
        *t = f32::from_bits(magnitude.to_bits() | ((bits & 0x8000) << 16));
    }
}

/// The dot products of two input rows `a` and `b` with each of the [`ROWS`] rows of
/// `w` (each `k` long; rows past the matrix's end hold stale values, never read back):
/// eight running sums in registers, each weight and input vector loaded once.
#[inline(always)]
fn dots<S: pulp::Simd>(
    simd: S,
    a: &[f32],
    b: &[f32],
    w: &[f32],
    k: usize,
) -> ([f32; ROWS], [f32; ROWS]) {
    let (w0, rest) = w.split_at(k);
    let (w1, rest) = rest.split_at(k);
    let (w2, w3) = rest.split_at(k);
    let (av, at) = S::as_simd_f32s(a);
    let (bv, _) = S::as_simd_f32s(b);
    let (w0v, _) = S::as_simd_f32s(w0);
    let (w1v, _) = S::as_simd_f32s(w1);
    let (w2v, _) = S::as_simd_f32s(w2);
    let (w3v, _) = S::as_simd_f32s(w3);
    let z = simd.splat_f32s(0.0);
    let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
    let (mut b0, mut b1, mut b2, mut b3) = (z, z, z, z);
    let lanes = av.iter().zip(bv).zip(w0v).zip(w1v).zip(w2v).zip(w3v);
    for (((((&xa, &xb), &v0), &v1), &v2), &v3) in lanes {
        a0 = simd.mul_add_e_f32s(xa, v0, a0);
        a1 = simd.mul_add_e_f32s(xa, v1, a1);
        a2 = simd.mul_add_e_f32s(xa, v2, a2);
        a3 = simd.mul_add_e_f32s(xa, v3, a3);
        b0 = simd.mul_add_e_f32s(xb, v0, b0);
        b1 = simd.mul_add_e_f32s(xb, v1, b1);
        b2 = simd.mul_add_e_f32s(xb, v2, b2);
        b3 = simd.mul_add_e_f32s(xb, v3, b3);
    }
    let tail = k - at.len();
    let rest = |x: &[f32], r: &[f32]| -> f32 {
        x[tail..k].iter().zip(&r[tail..k]).map(|(p, q)| p * q).sum()
    };
    let rows = [w0, w1, w2, w3];
    let mut sa = [0f32; ROWS];
    let mut sb = [0f32; ROWS];
    for (r, (acc_a, acc_b)) in [(a0, b0), (a1, b1), (a2, b2), (a3, b3)]
        .into_iter()
        .enumerate()
    {
        sa[r] = simd.reduce_sum_f32s(acc_a) + rest(a, rows[r]);
        sb[r] = simd.reduce_sum_f32s(acc_b) + rest(b, rows[r]);
    }
    (sa, sb)
}

/// Multi-head self-attention, each token over the tokens of its own sequence (`spans`:
/// the rows of each sequence; no mask needed): `qkv` holds per token the query, key
/// and value (`3 * h`); the result, per token, the heads' outputs side by side (`h`).
/// Compiled per instruction set like the products.
fn attend(
    qkv: &[f32],
    spans: &[std::ops::Range<usize>],
    h: usize,
    heads: usize,
    ctx: &mut Vec<f32>,
    p: &mut Vec<f32>,
) {
    pulp::Arch::new().dispatch(Attend {
        qkv,
        spans,
        h,
        heads,
        ctx,
        p,
    });
}

struct Attend<'a> {
    qkv: &'a [f32],
    spans: &'a [std::ops::Range<usize>],
    h: usize,
    heads: usize,
    ctx: &'a mut Vec<f32>,
    p: &'a mut Vec<f32>,
}

impl pulp::WithSimd for Attend<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let Attend {
            qkv,
            spans,
            h,
            heads,
            ctx,
            p,
        } = self;
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        let m = qkv.len() / (3 * h);
        ctx.clear();
        ctx.resize(m * h, 0.0);
        let row = |t: usize| &qkv[t * 3 * h..(t + 1) * 3 * h];
        for span in spans {
            p.clear();
            p.resize(span.len(), 0.0);
            for head in 0..heads {
                let at = head * d;
                for i in span.clone() {
                    let q = &row(i)[at..at + d];
                    let mut max = f32::NEG_INFINITY;
                    for (j, s) in span.clone().zip(p.iter_mut()) {
                        *s = dot(q, &row(j)[h + at..h + at + d]) * scale;
                        max = max.max(*s);
                    }
                    for s in p.iter_mut() {
                        *s = exp(*s - max);
                    }
                    let sum = sum(p);
                    let out = &mut ctx[i * h + at..i * h + at + d];
                    for (j, s) in span.clone().zip(p.iter()) {
                        let w = s / sum;
                        let v = &row(j)[2 * h + at..2 * h + at + d];
                        for (o, x) in out.iter_mut().zip(v) {
                            *o += w * x;
                        }
                    }
                }
            }
        }
    }
}

/// Layer normalization of each `h`-wide row of `x`, compiled per instruction set.
fn layer_norm(x: &mut [f32], n: &Norm) {
    pulp::Arch::new().dispatch(Normalize { x, n });
}

struct Normalize<'a> {
    x: &'a mut [f32],
    n: &'a Norm,
}

impl pulp::WithSimd for Normalize<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let Normalize { x, n } = self;
        let h = n.gain.len();
        for row in x.chunks_exact_mut(h) {
            let mean = sum(row) / h as f32;
            for v in row.iter_mut() {
                *v -= mean;
            }
            let var = dot(row, row) / h as f32;
            let inv = 1.0 / (var + n.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&n.gain).zip(&n.bias) {
                *v = *v * inv * g + b;
            }
        }
    }
}

/// Lanes of the partial sums in [`dot`] and [`sum`]: a fixed count, so that the
/// compiler may keep them in one vector register (a plain running sum has to add in
/// order and stays scalar).
const LANES: usize = 8;

/// `a . b` over their common length, in [`LANES`] partial sums.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The sum of `a`, in [`LANES`] partial sums.
#[inline(always)]
fn sum(a: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = a.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for x in chunks {
        for l in 0..LANES {
            acc[l] += x[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `e^x` without a library call, so that loops over it vectorize: `x = n ln 2 + r`
/// with `|r| <= ln 2 / 2` (ln 2 split in two parts so that `n ln 2` is exact), `e^r`
/// by its Taylor series to the 7th power (truncation below 2^-24 relative), and `2^n`
/// put into the exponent bits. Within 2 units in the last place of `f32::exp` over the
/// range used here (tested); `x` is clamped to `[-87, 88]`, where `e^x` is a normal
/// `f32`.
#[inline(always)]
fn exp(x: f32) -> f32 {
    // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
    const SHIFT: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let t = x * std::f32::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // The low bits of `t` hold n + 2^22 (two's complement inside the mantissa).
    let bits = t.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(127) << 23;
    p * f32::from_bits(bits)
}

/// The error function, by Abramowitz and Stegun's formula 7.1.26 (absolute error below
/// 1.5e-7; evaluated in `f32`, within 6e-7 of `libm::erff`, tested), with [`exp`]: no
/// branch and no library call, so the activation vectorizes. Next to the half-float
/// weights' rounding (relative 2^-11) this is invisible in the embeddings.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    (1.0 - poly * exp(-a * a)).copysign(x)
}

#[inline(always)]
fn activate(x: &mut [f32], act: Act) {
    match act {
        Act::Gelu => {
            for v in x {
                *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
        Act::GeluTanh => {
            let c = (2.0 / std::f32::consts::PI).sqrt();
            for v in x {
                let u = c * (*v + 0.044_715 * *v * *v * *v);
                *v = 0.5 * *v * (1.0 + u.tanh());
            }
        }
        Act::Relu => {
            for v in x {
                *v = v.max(0.0);
            }
        }
    }
}

/// Mean of the token states (all attended), scaled to unit length when `normalize`.
pub(crate) fn mean_pool(states: &[f32], h: usize, normalize: bool) -> Vec<f32> {
    let m = (states.len() / h).max(1);
    let mut out = vec![0f32; h];
    for row in states.chunks_exact(h) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
    for o in &mut out {
        *o /= m as f32;
    }
    if normalize {
        let n = out.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        for o in &mut out {
            *o /= n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats_widen_exactly() {
        // Every finite half float, subnormals and both zeros included.
        let bits: Vec<u16> = (0..=u16::MAX)
            .filter(|&b| f16::from_bits(b).is_finite())
            .collect();
        let mut got = vec![0f32; bits.len()];
        widen(&bits, &mut got);
        for (&b, g) in bits.iter().zip(&got) {
            let want = f16::from_bits(b).to_f32();
            assert_eq!(g.to_bits(), want.to_bits(), "half {b:#06x}");
        }
    }

    #[test]
    fn exp_stays_within_two_units_in_the_last_place() {
        // Two million points from -87 to 88 (the softmax and erf use the negative
        // side), against the library's `exp`.
        let n = 2_000_000;
        for i in 0..=n {
            let x = -87.0 + 175.0 * (i as f32 / n as f32);
            let (got, want) = (exp(x), x.exp());
            let ulps = got.to_bits().abs_diff(want.to_bits());
            assert!(ulps <= 2, "exp({x}) = {got}, want {want} ({ulps} ulp)");
        }
        // Outside the clamp: finite, and 0 / large rather than garbage.
        assert!(exp(-1000.0) >= 0.0 && exp(-1000.0) < 1e-37);
        assert!(exp(1000.0).is_finite() && exp(1000.0) > 1e38);
    }

    #[test]
    fn erf_and_gelu_match_the_library_within_rounding() {
        let mut worst = 0f32;
        for i in -60_000..=60_000 {
            let x = i as f32 / 10_000.0;
            let d = (erf(x) - libm::erff(x)).abs();
            worst = worst.max(d);
            let mut g = [x];
            activate(&mut g, Act::Gelu);
            let want = 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2));
            assert!(
                (g[0] - want).abs() <= 3e-7 * x.abs().max(1.0),
                "gelu({x}) = {}, want {want}",
                g[0]
            );
        }
        assert!(worst <= 6e-7, "erf off by {worst}");
        // Odd, as erf is; GELU(0) is exactly 0.
        assert_eq!(erf(-1.5), -erf(1.5));
        let mut zero = [0.0f32];
        activate(&mut zero, Act::Gelu);
        assert_eq!(zero[0], 0.0);
    }

    #[test]
    fn sums_and_dots_cover_every_length() {
        for n in 0..40 {
            let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
            let b: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 * 0.25).collect();
            let want_dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let want_sum: f32 = a.iter().sum();
            assert!((dot(&a, &b) - want_dot).abs() <= 1e-4 * want_dot.abs().max(1.0));
            assert!((sum(&a) - want_sum).abs() <= 1e-4 * want_sum.abs().max(1.0));
        }
    }

    #[test]
    fn products_match_a_plain_loop_for_every_shape() {
        // Sizes around the blocking: rows not a multiple of ROWS, inputs not a multiple
        // of the vector width, one and several input rows, both halves.
        for (m, n, k) in [
            (1, 3, 5),
            (2, 4, 8),
            (3, 17, 33),
            (7, 40, 384),
            (8, 64, 100),
        ] {
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
                .collect();
            let b: Vec<f32> = (0..n).map(|i| i as f32 / 8.0).collect();
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
                .collect();
            let d = Dense {
                w: w.iter().map(|&v| f16::from_f32(v).to_bits()).collect(),
                b: b.clone(),
                outputs: n,
                inputs: k,
            };
            let mut y = Vec::new();
            let mut halves = Halves::default();
            apply(&d, &x, m, &mut y, &mut halves, None);
            assert_eq!(y.len(), m * n);
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = b[j]
                        + (0..k)
                            .map(|t| x[i * k + t] * f16::from_f32(w[j * k + t]).to_f32())
                            .sum::<f32>();
                    let got = y[i * n + j];
                    assert!(
                        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                        "m={m} n={n} k={k} ({i},{j}): {got} vs {want}"
                    );
                }
            }
        }
    }
}
