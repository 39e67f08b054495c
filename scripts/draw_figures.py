#!/usr/bin/env python3
"""Draw the pictures the stage READMEs use, from the same constants and index formulas the kernels use.

    python3 scripts/draw_figures.py            # writes docs/figures/*.png

Each figure is computed, not drawn by hand: the formulas below are the kernels' own (file and
function named beside each), so a learner can check a picture against the code.

- stage1-blocktile-2d.png     rung 05: which thread owns which 8 x 8 piece of the block's 128 x 128
                              C tile, and the 128 x 8 / 8 x 128 tiles of A and B it reads at each k
- stage1-warptile.png         rung 08: which warp owns which 32 x 64 piece of the 128 x 128 C tile,
                              which lane owns which 4 x 4 sub-tiles of it, and what warp 0 reads from
                              the shared-memory A (transposed, padded) and B tiles at one k
- stage2-warp-reduction.png   the butterfly of a warp reduction (kc/core/reduce.cuh): after five
                              xor-shuffles every lane holds the sum of all 32
- stage3-mma-m16n8k16.png     mma.sync m16n8k16 (bf16): which lane holds which elements of A, B and
                              C, and in which register (PTX ISA, "Matrix Fragments for mma.m16n8k16")
- stage3-ldmatrix-x4.png      ldmatrix.x4 as rungs 02-03 use it for A: the row address each lane
                              gives (fragment_lane_offsets in gemm/mma_sync_common.cuh)
- stage3-swizzle-128b.png     the 128-byte swizzle (gemm/gemm_layout.hpp): where each 16-byte chunk
                              of eight 128-byte rows is stored, and why ldmatrix then meets 32 banks
- stage3-pipeline-phases.png  the producer/consumer ring of rungs 06-10 (gemm/pipeline.cuh): stages,
                              full/empty mbarriers, and the phase parity each side waits for
"""
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "figures")


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def save(figure, name):
    path = os.path.join(OUT, name)
    figure.savefig(path, dpi=130, bbox_inches="tight")
    print(f"wrote {os.path.relpath(path)}")


# ---- stage 1, rung 05 (stage1-sgemm/kernels/05_blocktile_2d.cu) ------------------------------------
TILE_ROWS, TILE_COLS, TILE_K, THREAD_ROWS, THREAD_COLS = 128, 128, 8, 8, 8
THREADS_PER_ROW = TILE_COLS // THREAD_COLS  # 16


def stage1_blocktile():
    p = plt()
    figure, (ax_a, ax_c) = p.subplots(1, 2, figsize=(12, 6.2), gridspec_kw={"width_ratios": [1, 6]})
    # C tile: thread t owns rows (t / 16) * 8 .. + 7, columns (t % 16) * 8 .. + 7.
    for t in range(TILE_ROWS // THREAD_ROWS * THREADS_PER_ROW):
        row, col = (t // THREADS_PER_ROW) * THREAD_ROWS, (t % THREADS_PER_ROW) * THREAD_COLS
        shade = 0.93 if (t // THREADS_PER_ROW + t % THREADS_PER_ROW) % 2 else 0.82
        highlight = t in (0, 1, 16, 255)
        ax_c.add_patch(p.Rectangle((col, row), THREAD_COLS, THREAD_ROWS, facecolor="tab:orange" if highlight else str(shade),
                                   edgecolor="white", linewidth=0.5))
        if t % 17 == 0 or highlight:
            ax_c.text(col + 4, row + 4, f"t{t}", ha="center", va="center", fontsize=6)
    ax_c.set_xlim(0, TILE_COLS)
    ax_c.set_ylim(TILE_ROWS, 0)
    ax_c.set_aspect("equal")
    ax_c.set_title("the block's 128 x 128 tile of C: thread t owns the 8 x 8 piece at\n"
                   "rows (t / 16) * 8, columns (t % 16) * 8 (256 threads)", fontsize=9)
    ax_c.set_xlabel("column of the C tile (n)")
    # A tile 128 x 8 and the 8 values thread 0 reads at k = 0 (its rows 0..7).
    for r in range(TILE_ROWS):
        for k in range(TILE_K):
            ax_a.add_patch(p.Rectangle((k, r), 1, 1, facecolor="tab:orange" if (r < 8 and k == 0) else "0.88",
                                       edgecolor="white", linewidth=0.2))
    ax_a.set_xlim(0, TILE_K)
    ax_a.set_ylim(TILE_ROWS, 0)
    ax_a.set_aspect("equal")
    ax_a.set_title("A tile\n128 x 8", fontsize=9)
    ax_a.set_xlabel("k")
    ax_a.set_ylabel("row of the C tile (m)")
    figure.suptitle("Stage 1, rung 05 (2D blocktiling): at each k thread 0 reads 8 values of A (orange, a column "
                    "piece) and 8 of B,\nand does the 8 x 8 = 64 FMAs of their outer product into its orange piece "
                    "of C", fontsize=10)
    save(figure, "stage1-blocktile-2d.png")


# ---- stage 1, rung 08 (stage1-sgemm/kernels/08_warptile.cu) --------------------------------------
# warptile_config() in 08_warptile.cu: bm, bn, bk, wm, wn, tm, tn (stages 1).
WT_BM, WT_BN, WT_BK, WT_WM, WT_WN, WT_TM, WT_TN = 128, 128, 8, 32, 64, 8, 8
WT_WARPS_N = WT_BN // WT_WN                 # WarpTileConfig::warps_n() = 2
WT_LANES_M, WT_LANES_N = WT_WM // WT_TM, WT_WN // WT_TN  # lanes_m() = 4, lanes_n() = 8
WT_THREADS = 32 * (WT_BM // WT_WM) * WT_WARPS_N          # threads() = 256
WT_A_STRIDE = WT_BM + 4                     # a_stride(): the padded row of the transposed A tile


def warptile_placement(thread):
    """warptile_placement in kc/stage1/sgemm_tiling.hpp: (row0, row_step, col0, col_step)."""
    warp, lane = thread // 32, thread % 32
    warp_m, warp_n = warp // WT_WARPS_N, warp % WT_WARPS_N
    lane_m, lane_n = lane // WT_LANES_N, lane % WT_LANES_N
    return warp_m * WT_WM + lane_m * 4, WT_LANES_M * 4, warp_n * WT_WN + lane_n * 4, WT_LANES_N * 4


def warptile_subtiles(thread):
    """Top-left corners (row, col) of the thread's (tm/4) x (tn/4) sub-tiles of 4 x 4 outputs
    (store_register_tile in kernels/sgemm_common.cuh)."""
    row0, row_step, col0, col_step = warptile_placement(thread)
    return [(row0 + sm * row_step, col0 + sn * col_step) for sm in range(WT_TM // 4) for sn in range(WT_TN // 4)]


def vec4_slot(slot, cols):
    """vec4_slot in kc/stage1/sgemm_tiling.hpp: (row, col) of the float4 a thread copies."""
    return slot // (cols // 4), 4 * (slot % (cols // 4))


def stage1_warptile():
    p = plt()
    from matplotlib.gridspec import GridSpec

    warp_colors = ["#fde0c5", "#c6dbef", "#d9f0d3", "#e7d4e8", "#fff7bc", "#d0d1e6", "#fcc5c0", "#ccece6"]
    lane_a, lane_b = 0, 9  # the two lanes picked out in orange and blue
    figure = p.figure(figsize=(15, 13))
    grid = GridSpec(3, 2, figure=figure, height_ratios=[5.4, 2.1, 2.1], width_ratios=[1, 1.45],
                    hspace=0.5, wspace=0.12)

    # (1) The block tile: warp w owns the wm x wn piece at (w / warps_n, w % warps_n).
    ax = figure.add_subplot(grid[0, 0])
    for warp in range(WT_THREADS // 32):
        row0, _, col0, _ = warptile_placement(32 * warp)
        ax.add_patch(p.Rectangle((col0, row0), WT_WN, WT_WM, facecolor=warp_colors[warp], edgecolor="black",
                                 linewidth=1.2))
        x = col0 + (52 if warp == 0 else WT_WN / 2)  # warp 0's middle holds the picked lanes' squares
        ax.text(x, row0 + WT_WM / 2, f"warp {warp}\n(warp_m {warp // WT_WARPS_N},\nwarp_n {warp % WT_WARPS_N})\n"
                f"threads\n{32 * warp}-{32 * warp + 31}", ha="center", va="center", fontsize=7.5)
    for lane, color in ((lane_a, "tab:orange"), (lane_b, "tab:blue")):
        for row, col in warptile_subtiles(lane):
            ax.add_patch(p.Rectangle((col, row), 4, 4, facecolor=color, edgecolor="black", linewidth=0.4))
    ax.set_xlim(0, WT_BN)
    ax.set_ylim(WT_BM, 0)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, WT_BN + 1, 32))
    ax.set_yticks(range(0, WT_BM + 1, 32))
    ax.set_xlabel("column n of the block's C tile")
    ax.set_ylabel("row m of the block's C tile")
    ax.set_title(f"(1) The {WT_BM} x {WT_BN} block tile: {WT_THREADS // 32} warps, each a {WT_WM} x {WT_WN} "
                 f"warp tile\n(orange: lane {lane_a}'s outputs, blue: lane {lane_b}'s, both in warp 0)", fontsize=10)

    # (2) Warp 0's tile: lane l sits at (l / lanes_n, l % lanes_n) and owns 2 x 2 sub-tiles of 4 x 4.
    ax = figure.add_subplot(grid[0, 1])
    for lane in range(32):
        for row, col in warptile_subtiles(lane):
            color = {lane_a: "tab:orange", lane_b: "tab:blue"}.get(lane, warp_colors[0])
            ax.add_patch(p.Rectangle((col, row), 4, 4, facecolor=color, edgecolor="white", linewidth=1.0))
            ax.text(col + 2, row + 2, f"{lane}", ha="center", va="center", fontsize=8,
                    color="white" if lane in (lane_a, lane_b) else "black")
    for x in (0, WT_WN // 2, WT_WN):
        ax.axvline(x, color="black", linewidth=1.2)
    for y in (0, WT_WM // 2, WT_WM):
        ax.axhline(y, color="black", linewidth=1.2)
    ax.set_xlim(0, WT_WN)
    ax.set_ylim(WT_WM, 0)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, WT_WN + 1, 4))
    ax.set_yticks(range(0, WT_WM + 1, 4))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("column n in warp 0's tile")
    ax.set_ylabel("row m in warp 0's tile")
    ax.set_title(f"(2) Warp 0's {WT_WM} x {WT_WN} tile, each 4 x 4 square labelled with the lane that owns it:\n"
                 f"lane l sits at (l / {WT_LANES_N}, l % {WT_LANES_N}) of a {WT_LANES_M} x {WT_LANES_N} grid; its "
                 f"{WT_TM // 4} x {WT_TN // 4} sub-tiles of 4 x 4 repeat every {WT_LANES_M * 4} rows and "
                 f"{WT_LANES_N * 4} columns", fontsize=10)

    # What warp 0 reads at k = 0 with its LDS.128 (load_fragment: first, first + step).
    warp0 = [warptile_placement(t) for t in range(32)]
    a_reads = [{row0 + s * row_step: [] for row0, row_step, _, _ in warp0} for s in range(WT_TM // 4)]
    b_reads = [{col0 + s * col_step: [] for _, _, col0, col_step in warp0} for s in range(WT_TN // 4)]
    for lane, (row0, row_step, col0, col_step) in enumerate(warp0):
        for s in range(WT_TM // 4):
            a_reads[s][row0 + s * row_step].append(lane)
        for s in range(WT_TN // 4):
            b_reads[s][col0 + s * col_step].append(lane)
    read_colors = ["tab:orange", "#fdae6b"]

    def lane_text(lanes):
        runs = lanes == list(range(lanes[0], lanes[-1] + 1))
        return f"{lanes[0]}-{lanes[-1]}" if runs else ",".join(map(str, lanes[:2])) + ",\n" + ",".join(map(str, lanes[2:]))

    # (3) The transposed A tile, smem_a[k * a_stride + m] (load_a_tile_transposed).
    ax = figure.add_subplot(grid[1, :])
    for k in range(WT_BK):
        for m in range(0, WT_A_STRIDE, 4):
            band = m // WT_WM
            face = "0.75" if m >= WT_BM else warp_colors[2 * band] if band < 4 else "white"
            ax.add_patch(p.Rectangle((m, k), 4, 1, facecolor=face, edgecolor="white", linewidth=0.8,
                                     hatch="//" if m >= WT_BM else None))
    for s, reads in enumerate(a_reads):
        for m, lanes in reads.items():
            ax.add_patch(p.Rectangle((m, 0), 4, 1, facecolor=read_colors[s], edgecolor="black", linewidth=0.6))
            ax.text(m + 2, 0.5, lane_text(lanes), ha="center", va="center", fontsize=6.5)
    for t in (0, 1):  # what threads 0 and 1 store: one float4 of a row of A, down one column
        row, col = vec4_slot(t, WT_BK)
        ax.add_patch(p.Rectangle((row, col + 0.1), 1, 3.8, fill=False, edgecolor="red", linewidth=2))
        ax.annotate(f"thread {t}: A[{row}][{col}..{col + 3}] (one LDG.E.128), stored down column m = {row}, "
                    f"k = {col}..{col + 3} (4 STS)", xy=(row + 1, col + 2), xytext=(36, 2.6 + 3 * t),
                    va="center", fontsize=8, color="red", bbox={"facecolor": "white", "edgecolor": "none"},
                    arrowprops={"arrowstyle": "->", "color": "red", "linewidth": 0.8})
    for band in range(WT_BM // WT_WM):
        ax.text(band * WT_WM + WT_WM / 2, -0.35, f"m {band * WT_WM}-{band * WT_WM + WT_WM - 1}: read by warps "
                f"{2 * band} and {2 * band + 1}", ha="center", va="bottom", fontsize=8)
    ax.text(WT_BM + 2, -0.35, "padding", ha="center", va="bottom", fontsize=8)
    ax.set_xlim(0, WT_A_STRIDE)
    ax.set_ylim(WT_BK, 0)
    ax.set_xticks(range(0, WT_A_STRIDE + 1, 16))
    ax.set_yticks([i + 0.5 for i in range(WT_BK)])
    ax.set_yticklabels([f"k={i}" for i in range(WT_BK)], fontsize=7)
    ax.set_xlabel(f"m (row of the A tile): smem_a[k * {WT_A_STRIDE} + m], one box per float4", labelpad=2)
    ax.set_title(f"(3) Shared memory, A transposed: {WT_BK} rows of {WT_BM} + 4 floats (the 4 of padding shift row k "
                 f"by 4k banks). At k = 0 warp 0's first LDS.128 reads the {len(a_reads[0])} dark\norange float4 "
                 f"(lanes shown; each is read by 8 lanes, a broadcast), its second the {len(a_reads[1])} light "
                 f"ones: rows 4(l / 8) and 16 + 4(l / 8) of its A values", fontsize=10, pad=16)

    # (4) The B tile as it is, smem_b[k * bn + n] (load_b_tile).
    ax = figure.add_subplot(grid[2, :])
    for k in range(WT_BK):
        for n in range(0, WT_BN, 4):
            ax.add_patch(p.Rectangle((n, k), 4, 1, facecolor=warp_colors[n // WT_WN], edgecolor="white", linewidth=0.8))
    for s, reads in enumerate(b_reads):
        for n, lanes in reads.items():
            ax.add_patch(p.Rectangle((n, 0), 4, 1, facecolor=read_colors[s], edgecolor="black", linewidth=0.6))
            ax.text(n + 2, 0.5, lane_text(lanes), ha="center", va="center", fontsize=6)
    for t in (0, 1):
        row, col = vec4_slot(t, WT_BN)
        ax.add_patch(p.Rectangle((col + 0.15, row + 0.08), 3.7, 0.84, fill=False, edgecolor="red", linewidth=2))
    row, col = vec4_slot(33, WT_BN)
    ax.add_patch(p.Rectangle((col + 0.15, row + 0.08), 3.7, 0.84, fill=False, edgecolor="red", linewidth=2))
    ax.annotate("thread t copies B[t / 32][4(t % 32)..+3]: one LDG.E.128, one STS.128 (threads 0, 1 and 33 boxed)",
                xy=(col + 4, row + 0.5), xytext=(36, 4.5), va="center", fontsize=8, color="red",
                bbox={"facecolor": "white", "edgecolor": "none"},
                arrowprops={"arrowstyle": "->", "color": "red", "linewidth": 0.8})
    for half in range(WT_WARPS_N):
        ax.text(half * WT_WN + WT_WN / 2, -0.35, f"n {half * WT_WN}-{half * WT_WN + WT_WN - 1}: read by warps "
                + ", ".join(str(w) for w in range(half, WT_THREADS // 32, WT_WARPS_N)), ha="center", va="bottom",
                fontsize=8)
    ax.set_xlim(0, WT_A_STRIDE)
    ax.set_ylim(WT_BK, 0)
    ax.set_xticks(range(0, WT_BN + 1, 16))
    ax.set_yticks([i + 0.5 for i in range(WT_BK)])
    ax.set_yticklabels([f"k={i}" for i in range(WT_BK)], fontsize=7)
    ax.set_xlabel(f"n (column of the B tile): smem_b[k * {WT_BN} + n], one box per float4", labelpad=2)
    ax.set_title(f"(4) Shared memory, B as it is: {WT_BK} rows of {WT_BN} floats. At k = 0 warp 0's first LDS.128 "
                 f"reads the {len(b_reads[0])} dark orange float4 (one 128-byte row, each float4 read by the\n"
                 f"{len(b_reads[0][0])} lanes shown), its second the {len(b_reads[1])} light ones: columns 4(l % 8) "
                 f"and 32 + 4(l % 8) of its B values", fontsize=10, pad=16)

    figure.suptitle("Stage 1, rung 08 (warptiling): who owns which outputs, and what a warp reads from shared memory "
                    "at one k\n(warptile_placement in kc/stage1/sgemm_tiling.hpp, with 08_warptile.cu's "
                    f"{WT_BM}x{WT_BN}x{WT_BK} block, {WT_WM}x{WT_WN} warp and {WT_TM}x{WT_TN} thread tiles)",
                    fontsize=12, y=0.995)
    save(figure, "stage1-warptile.png")


# ---- stage 2: a warp's butterfly reduction (stage2-core/include/kc/core/reduce.cuh) ------------------
def stage2_warp_reduction():
    p = plt()
    figure, ax = p.subplots(figsize=(13, 4.6))
    offsets = [16, 8, 4, 2, 1]
    for level, offset in enumerate(offsets):
        for lane in range(32):
            partner = lane ^ offset
            ax.plot([lane, partner], [level, level + 1], color="0.6", linewidth=0.5)
    for level in range(len(offsets) + 1):
        covered = 2 ** level  # lanes whose values each lane has summed
        for lane in range(32):
            ax.add_patch(p.Circle((lane, level), 0.28, color="tab:blue" if level == len(offsets) else "tab:gray"))
        label = "each lane: its own value" if level == 0 else f"after xor {offsets[level - 1]}: sum of {covered} lanes"
        ax.text(32.2, level, label, va="center", fontsize=8)
    ax.set_xlim(-1, 42)
    ax.set_ylim(len(offsets) + 0.6, -0.6)
    ax.set_xticks(range(0, 32, 4))
    ax.set_xlabel("lane")
    ax.set_yticks([])
    ax.set_title("A warp reduction: v += __shfl_xor_sync(mask, v, offset) for offset = 16, 8, 4, 2, 1. "
                 "Each step adds a partner's partial sum;\nafter five steps all 32 lanes hold the whole sum "
                 "(no shared memory, no barrier). A block reduction does this per warp, then once more "
                 "over the warps' results.", fontsize=9)
    save(figure, "stage2-warp-reduction.png")


# ---- stage 3: mma.sync m16n8k16 fragments (PTX ISA) -------------------------------------------------
def fragment_a(row, col):
    """(lane, register) holding A[row][col], 16 x 16 bf16: a0 rows 0-7 k 0-7, a1 rows 8-15 k 0-7,
    a2 rows 0-7 k 8-15, a3 rows 8-15 k 8-15; lane = 4 * (row % 8) + (col % 8) / 2."""
    return 4 * (row % 8) + (col % 8) // 2, (row // 8) + 2 * (col // 8)


def fragment_b(k, n):
    """(lane, register) holding B[k][n], 16 x 8: b0 k 0-7, b1 k 8-15; lane = 4 * n + (k % 8) / 2."""
    return 4 * n + (k % 8) // 2, k // 8


def fragment_c(row, col):
    """(lane, register) holding C[row][col], 16 x 8 FP32: c0 c1 row lane / 4, c2 c3 row lane / 4 + 8;
    column 2 * (lane % 4) + (0 or 1)."""
    return 4 * (row % 8) + col // 2, 2 * (row // 8) + col % 2


def stage3_mma_fragments():
    p = plt()
    colors = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072"]
    figure, axes = p.subplots(1, 3, figsize=(17, 7), gridspec_kw={"width_ratios": [16, 8, 8]})
    for ax, (title, rows, cols, owner, prefix) in zip(axes, [
        ("A: 16 x 16 bf16 (4 registers of 2 values)", 16, 16, fragment_a, "a"),
        ("B: 16 (k) x 8 (n) bf16 (2 registers)", 16, 8, fragment_b, "b"),
        ("C/D: 16 x 8 FP32 (4 registers)", 16, 8, fragment_c, "c"),
    ]):
        for r in range(rows):
            for c in range(cols):
                lane, reg = owner(r, c)
                ax.add_patch(p.Rectangle((c, r), 1, 1, facecolor=colors[reg], edgecolor="white"))
                ax.text(c + 0.5, r + 0.5, f"{lane}\n{prefix}{reg}", ha="center", va="center", fontsize=5.5)
        ax.set_xlim(0, cols)
        ax.set_ylim(rows, 0)
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=6)
    axes[0].set_xlabel("k")
    axes[0].set_ylabel("m")
    axes[1].set_xlabel("n")
    axes[1].set_ylabel("k")
    axes[2].set_xlabel("n")
    figure.suptitle("mma.sync.aligned.m16n8k16 (bf16 in, FP32 accumulate): each cell shows the lane that holds "
                    "the element and the register it is in.\nThe two bf16 values of one A or B register are "
                    "neighbours along k, and a lane's C values come in pairs along n: ldmatrix (rows of 16 bytes) "
                    "feeds A and B directly.",
                    fontsize=10)
    save(figure, "stage3-mma-m16n8k16.png")


def stage3_ldmatrix():
    p = plt()
    figure, ax = p.subplots(figsize=(9, 7))
    colors = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072"]
    # fragment_lane_offsets: lane l gives the address of row l % 16, 16-byte chunk l / 16 (8 bf16).
    for lane in range(32):
        row, chunk = lane % 16, lane // 16
        matrix = lane // 8  # lanes 0-7 address matrix 0, 8-15 matrix 1, ...
        ax.add_patch(p.Rectangle((chunk * 8, row), 8, 1, facecolor=colors[matrix], edgecolor="white"))
        ax.text(chunk * 8 + 4, row + 0.5, f"lane {lane} gives this row's address -> matrix {matrix} (a{matrix})",
                ha="center", va="center", fontsize=6.5)
    ax.set_xlim(0, 16)
    ax.set_ylim(16, 0)
    ax.set_xticks(range(0, 17, 8))
    ax.set_xlabel("k (bf16 elements of the A tile)")
    ax.set_ylabel("row (m)")
    ax.set_title("ldmatrix.sync.aligned.m8n8.x4.b16 for the 16 x 16 A fragment (rungs 02-03):\n"
                 "32 lanes give 32 row addresses (lane l: row l % 16, 16-byte chunk l / 16); the instruction "
                 "reads four 8 x 8 matrices\nand hands lane t, in register i, row t / 4, columns 2(t % 4) and "
                 "2(t % 4) + 1 of matrix i: exactly the a0..a3 of the mma fragment.", fontsize=9)
    save(figure, "stage3-ldmatrix-x4.png")


def stage3_swizzle():
    p = plt()
    figure, (plain, swizzled) = p.subplots(1, 2, figsize=(14, 4.8))
    colors = p.get_cmap("tab10").colors
    for ax, swz, title in [(plain, False, "stored plainly: chunk c of every row in banks 4c..4c+3"),
                           (swizzled, True, "128-byte swizzle: stored at chunk c xor (row % 8)")]:
        for row in range(8):
            for chunk in range(8):
                stored = chunk ^ (row % 8) if swz else chunk  # swizzle_128b_chunk in gemm_layout.hpp
                ax.add_patch(p.Rectangle((stored, row), 1, 1, facecolor=colors[chunk], edgecolor="white", alpha=0.85))
                ax.text(stored + 0.5, row + 0.5, f"c{chunk}", ha="center", va="center", fontsize=8)
        ax.set_xlim(0, 8)
        ax.set_ylim(8, 0)
        ax.set_xticks([i + 0.5 for i in range(8)])
        ax.set_xticklabels([f"banks {4 * i}-{4 * i + 3}" for i in range(8)], rotation=30, fontsize=7)
        ax.set_yticks([i + 0.5 for i in range(8)])
        ax.set_yticklabels([f"row {i}" for i in range(8)], fontsize=7)
        ax.set_title(title, fontsize=9)
    figure.suptitle("A tile row is 128 bytes = eight 16-byte chunks (64 bf16). ldmatrix reads one chunk from each of "
                    "8 rows per phase: plainly stored, chunk c0 of rows 0-7\nsits in banks 0-3 eight times "
                    "(an 8-way conflict); swizzled, the eight c0 land in eight different bank groups. TMA "
                    "(SWIZZLE_128B) writes and WGMMA reads this layout.", fontsize=9)
    save(figure, "stage3-swizzle-128b.png")


def stage3_pipeline():
    p = plt()
    stages, k_steps = 4, 10
    figure, ax = p.subplots(figsize=(14, 4.6))
    for step in range(k_steps):
        stage, phase = step % stages, (step // stages) % 2
        # producer: waits empty[stage] with parity phase ^ 1, issues the TMA into the stage
        ax.add_patch(p.Rectangle((step, 1.15), 0.9, 0.7, facecolor="tab:green", alpha=0.6))
        ax.text(step + 0.45, 1.5, f"TMA -> s{stage}\nwait empty[{stage}]\nparity {phase ^ 1}", ha="center",
                va="center", fontsize=6.5)
        # consumers: wait full[stage] with parity phase, run the WGMMAs, release (arrive on empty)
        ax.add_patch(p.Rectangle((step + 0.5, 0.15), 0.9, 0.7, facecolor="tab:blue", alpha=0.6))
        ax.text(step + 0.95, 0.5, f"WGMMA s{stage}\nwait full[{stage}]\nparity {phase}", ha="center",
                va="center", fontsize=6.5)
    ax.set_xlim(-0.2, k_steps + 0.8)
    ax.set_ylim(-0.1, 2.1)
    ax.set_yticks([0.5, 1.5])
    ax.set_yticklabels(["consumer\nwarpgroups", "producer\n(1 thread)"])
    ax.set_xlabel("K step (time flows right; each side walks the stages 0, 1, 2, 3, 0, ... in the same order)")
    ax.set_title(
        f"The ring of {stages} shared-memory stages (gemm/pipeline.cuh). An mbarrier completes phases 0, 1, 0, 1, ...; "
        "try_wait.parity(P) returns once the phase with parity P has completed.\n"
        "Each side flips the parity it waits for whenever it wraps around the ring. A fresh barrier has completed "
        "'phase -1' (parity 1), so the producer's first\nwait on empty[s] (parity 1) passes at once: every stage starts "
        "empty. The consumer's first wait on full[s] (parity 0) passes when the TMA bytes have landed.",
        fontsize=8.5)
    save(figure, "stage3-pipeline-phases.png")


def main():
    os.makedirs(OUT, exist_ok=True)
    stage1_blocktile()
    stage1_warptile()
    stage2_warp_reduction()
    stage3_mma_fragments()
    stage3_ldmatrix()
    stage3_swizzle()
    stage3_pipeline()


if __name__ == "__main__":
    sys.exit(main())
