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
- stage2-row-team.png         the row team of the register kernels: plan_row()'s warp or block per
                              row (kc/core/launch.hpp), the 16-byte vectors each thread holds in
                              RowFragment (kc/core/row_team.cuh), and block_reduce (kc/core/reduce.cuh)
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


# ---- stage 2: the row team of the register kernels ----------------------------------------------
# kc/core/launch.hpp: kRowVectorsPerThread, kWarpRowsPerBlock, kMaxBlockThreads and plan_row().
ROW_VECTORS_PER_THREAD, WARP_ROWS_PER_BLOCK, MAX_BLOCK_THREADS, WARP = 4, 4, 1024, 32


def ceil_div(a, b):
    return (a + b - 1) // b


def plan_row(cols, vector_width, vectors_per_thread=ROW_VECTORS_PER_THREAD):
    """kc::core::plan_row(), line for line: (team, threads_per_block, rows_per_block,
    every_slot_full, fits_in_registers)."""
    vectors = ceil_div(cols, vector_width)
    if vectors <= WARP * vectors_per_thread:
        return "warp", WARP * WARP_ROWS_PER_BLOCK, WARP_ROWS_PER_BLOCK, vectors == WARP * vectors_per_thread, True
    threads = ceil_div(ceil_div(vectors, vectors_per_thread), WARP) * WARP
    fits = threads <= MAX_BLOCK_THREADS
    full = fits and vectors == threads * vectors_per_thread
    return "block", min(threads, MAX_BLOCK_THREADS), 1, full, fits


def fragment_column(rank, slot, team_size, vec):
    """RowFragment::column(slot) in kc/core/row_team.cuh: (rank + slot * team_size) * kVec."""
    return (rank + slot * team_size) * vec


def stage2_row_team():
    p = plt()
    figure = p.figure(figsize=(14, 15.5))
    grid = figure.add_gridspec(3, 1, height_ratios=[1.25, 1.0, 1.25], hspace=0.42)
    ax_plan, ax_frag, ax_reduce = (figure.add_subplot(grid[i]) for i in range(3))
    row_colors = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"]

    # (a) plan_row() for bf16 rows (16-byte vectors of 8 elements; 4097 and 2050 get scalar accesses:
    # vector_width() needs cols to be a multiple of 8).
    cases = [(512, 8), (1024, 8), (2048, 8), (4096, 8), (8192, 8), (2050, 1), (32768, 8), (40000, 8)]
    for y, (cols, vec) in enumerate(cases):
        team, threads, rows_per_block, full, fits = plan_row(cols, vec)
        warps = threads // WARP
        for w in range(warps):
            color = row_colors[w % 4] if team == "warp" else (row_colors[0] if fits else "0.75")
            ax_plan.add_patch(p.Rectangle((w, y + 0.12), 0.92, 0.76, facecolor=color, edgecolor="white"))
            if team == "warp":
                ax_plan.text(w + 0.46, y + 0.5, f"r{w}", ha="center", va="center", fontsize=7, color="white")
        vectors = ceil_div(cols, vec)
        access = "16-byte vectors" if vec > 1 else "scalar accesses"
        if team == "warp":
            what = (f"a warp per row: {rows_per_block} rows per block of {threads} threads; "
                    f"{vectors} vectors = {ceil_div(vectors, WARP)} per lane")
        elif fits:
            what = (f"a block of {threads} threads per row; {vectors} {'vectors' if vec > 1 else 'elements'}"
                    f" = at most {ROW_VECTORS_PER_THREAD} per thread")
        else:
            what = (f"needs {ceil_div(ceil_div(vectors, ROW_VECTORS_PER_THREAD), WARP) * WARP} threads "
                    f"> {MAX_BLOCK_THREADS}: does not fit, streamed (rung-04 kernel)")
        slots = ", every slot full" if full else ""
        ax_plan.text(33, y + 0.5, f"cols = {cols} ({access}): {what}{slots}", va="center", fontsize=8.5)
    ax_plan.set_xlim(-0.3, 80)
    ax_plan.set_ylim(len(cases), 0)
    ax_plan.set_yticks([])
    for side in ("top", "right", "left"):
        ax_plan.spines[side].set_visible(False)
    ax_plan.spines["bottom"].set_bounds(0, 32)
    ax_plan.set_xticks(range(0, 33, 4))
    ax_plan.set_xlabel("warps in the block (at most 32); r0-r3: the four rows of a warp-per-row block", loc="left")
    ax_plan.set_title("(a) plan_row(cols, vector_width) in kc/core/launch.hpp, bf16: rows of up to 32 x 4 vectors "
                      "(1024 elements) go to a warp, four rows per block;\nlonger rows to a block of "
                      "round_up(vectors / 4, 32) threads; past 1024 threads the row cannot stay in registers",
                      fontsize=9.5, loc="left")

    # (b) RowFragment for a 4096-element bf16 row: plan_row gives a block of 128 threads, 4 slots each.
    cols, vec = 4096, 8
    team, team_size, _, full, _ = plan_row(cols, vec)
    highlight = {0: "tab:red", 37: "tab:purple", 127: "tab:brown"}
    for slot in range(ROW_VECTORS_PER_THREAD):
        for rank in range(team_size):
            column = fragment_column(rank, slot, team_size, vec)
            x = column / vec - slot * team_size  # position of the vector within its slot's stretch
            warp = rank // WARP
            color = highlight.get(rank, ["0.80", "0.90"][warp % 2])
            ax_frag.add_patch(p.Rectangle((x, slot), 1, 0.8, facecolor=color, edgecolor="white", linewidth=0.3))
        ax_frag.text(-2, slot + 0.4, f"slot {slot}\ncolumns {slot * team_size * vec}-{(slot + 1) * team_size * vec - 1}",
                     ha="right", va="center", fontsize=8)
    for warp in range(team_size // WARP):
        ax_frag.text(warp * WARP + WARP / 2, -0.25, f"warp {warp}: threads {warp * WARP}-{warp * WARP + 31}",
                     ha="center", va="bottom", fontsize=8)
    for rank, color in highlight.items():
        columns = [fragment_column(rank, s, team_size, vec) for s in range(ROW_VECTORS_PER_THREAD)]
        ax_frag.text(rank + 0.5, 4.05, f"t{rank}", ha="center", va="top", fontsize=8, color=color, fontweight="bold")
        ax_frag.plot([], [], "s", color=color, label=f"thread {rank}: columns {', '.join(map(str, columns))} (+0..7)")
    ax_frag.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax_frag.set_xlim(-24, team_size + 0.5)
    ax_frag.set_ylim(4.5, -0.7)
    ax_frag.set_xticks([0, 32, 64, 96, 127])
    ax_frag.set_yticks([])
    ax_frag.set_xlabel("thread (rank in the team); each cell is one 16-byte vector = 8 bf16")
    ax_frag.set_title(f"(b) RowFragment<8, 4> of a {cols}-element bf16 row (a block of {team_size} threads, every slot "
                      "full): slot s of thread t starts at column (t + s * 128) * 8.\nAt each slot the 128 threads read "
                      "2 KiB in one piece (each warp 512 contiguous bytes), and a thread's four vectors are 2 KiB apart; "
                      "all four loads are issued before any is used", fontsize=9.5, loc="left")

    # (c) block_reduce_once / block_reduce for that block: 4 warps.
    warps = team_size // WARP
    lane_x = lambda w, lane: w * 9 + lane * 0.25
    for w in range(warps):
        for lane in range(WARP):
            ax_reduce.add_patch(p.Rectangle((lane_x(w, lane), 0), 0.2, 0.5, facecolor=row_colors[w], edgecolor="none"))
            ax_reduce.add_patch(p.Rectangle((lane_x(w, lane), 2.2), 0.2, 0.5,
                                            facecolor=row_colors[w], edgecolor="none", alpha=0.55))
            ax_reduce.add_patch(p.Rectangle((lane_x(w, lane), 6.3), 0.2, 0.5, facecolor="0.35", edgecolor="none"))
        # the butterfly: five xor steps inside the warp
        for level, offset in enumerate([16, 8, 4, 2, 1]):
            y0, y1 = 0.5 + level * 0.34, 0.5 + (level + 1) * 0.34
            for lane in range(0, WARP, 3):
                ax_reduce.plot([lane_x(w, lane) + 0.1, lane_x(w, lane ^ offset) + 0.1], [y0, y1],
                               color=row_colors[w], linewidth=0.4)
        ax_reduce.text(lane_x(w, 16), -0.1, f"warp {w}: 32 partials", ha="center", va="bottom", fontsize=8)
        # lane 0 writes the warp's result to warp_partials[w]
        ax_reduce.annotate("", xy=(13 + w * 1.0 + 0.45, 3.6), xytext=(lane_x(w, 0) + 0.1, 2.7),
                           arrowprops=dict(arrowstyle="->", color=row_colors[w], linewidth=1.2))
    ax_reduce.text(36.5, 1.3, "warp_reduce: 5 xor shuffles\n(the butterfly of stage2-warp-reduction.png);\n"
                   "every lane of a warp ends with\nthe warp's sum", va="center", fontsize=8.5)
    ax_reduce.text(36.5, 2.45, "lane 0 of each warp stores it", va="center", fontsize=8.5)
    for slot in range(WARP):
        used = slot < warps
        ax_reduce.add_patch(p.Rectangle((13 + slot * 1.0 if used else 17 + (slot - warps) * 0.12, 3.6),
                                        0.9 if used else 0.1, 0.55,
                                        facecolor=row_colors[slot] if used else "0.85", edgecolor="white"))
    ax_reduce.text(12.5, 3.87, "__shared__ warp_partials[32]", ha="right", va="center", fontsize=8.5)
    ax_reduce.text(20.6, 3.87, f"(slots {warps}-31 unused)", va="center", fontsize=8)
    ax_reduce.plot([-0.5, 35.5], [4.45, 4.45], color="black", linestyle="--", linewidth=1)
    ax_reduce.text(36.5, 4.45, "__syncthreads() (the one barrier of block_reduce_once)", va="center", fontsize=8.5)
    for w in range(warps):
        for slot in range(warps):
            ax_reduce.annotate("", xy=(lane_x(w, slot) + 0.1, 5.25), xytext=(13 + slot * 1.0 + 0.45, 4.2),
                               arrowprops=dict(arrowstyle="->", color=row_colors[slot], linewidth=0.6))
        for lane in range(WARP):
            color = row_colors[lane] if lane < warps else "0.85"
            ax_reduce.add_patch(p.Rectangle((lane_x(w, lane), 5.25), 0.2, 0.4, facecolor=color, edgecolor="none"))
        ax_reduce.text(lane_x(w, 16), 5.72, "warp_reduce again", ha="center", va="top", fontsize=7.5)
    ax_reduce.text(36.5, 5.45, f"every warp reads lanes 0-{warps - 1}: warp_partials[lane];\n"
                   "lanes 4-31 take Op::identity() (grey)", va="center", fontsize=8.5)
    ax_reduce.text(36.5, 6.55, "every thread holds the block's result: no second\nbroadcast through shared memory. "
                   "block_reduce adds\na trailing __syncthreads() before warp_partials is reused", va="center",
                   fontsize=8.5)
    ax_reduce.set_xlim(-0.5, 55)
    ax_reduce.set_ylim(7.0, -0.6)
    ax_reduce.axis("off")
    ax_reduce.set_title(f"(c) block_reduce_once in kc/core/reduce.cuh for that block of {team_size} threads "
                        f"({warps} warps): a butterfly per warp, one exchange through shared memory, "
                        "a butterfly again", fontsize=9.5, loc="left")
    figure.suptitle("Stage 2's row team: who holds which part of a row, and how the team reduces it "
                    "(RMSNorm rung 05, LayerNorm rungs 04-05, softmax rungs 05-06)", fontsize=11, y=0.93)
    save(figure, "stage2-row-team.png")


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
    stage2_row_team()
    stage3_mma_fragments()
    stage3_ldmatrix()
    stage3_swizzle()
    stage3_pipeline()


if __name__ == "__main__":
    sys.exit(main())
