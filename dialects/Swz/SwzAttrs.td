//===- SwzAttrs.td - #swz.swizzle ---------------------------*- tablegen -*-===//
#ifndef SWZ_ATTRS_TD
#define SWZ_ATTRS_TD

include "Swz/SwzBase.td"

def Swz_SwizzleAttr : AttrDef<Swz_Dialect, "Swizzle"> {
  let mnemonic = "swizzle";
  let summary = "XOR-swizzled shared-memory layout Swizzle<B, M, S> (CuTe semantics)";
  let description = [{
    `#swz.swizzle<B, M, S>` permutes a linear **element** offset `o` of a
    shared-memory tile (units: elements of the tile's element type, as in CuTe's
    `Swizzle<B,M,S>`, never bytes):

    ```
    yyy_mask = ((1 << B) - 1) << (M + S)      // B bits taken from the row part
    o'       = o ^ ((o & yyy_mask) >> S)      // ...XORed into bits [M, M + B)
    ```

    * `M` (base): the lowest `M` bits are never touched, so runs of `2^M`
      consecutive elements stay contiguous. For f16, `M = 3` keeps 8-element =
      16-byte chunks intact: exactly one `ldmatrix` row or one `cp.async` of 16 bytes.
    * `B` (bits): how many bits are permuted; `2^B` chunks are shuffled.
    * `S` (shift): the distance from the bits that are read to the bits that are
      changed. With row-major rows of `2^(M+S)` elements, bits `[M+S, M+S+B)` of
      the offset are the low `B` bits of the row index, so `S = 3, M = 3` means
      "rows of 64 f16 = 128 bytes".

    Worked example, f16 tile with 64 columns (128-byte rows), `Swizzle<3,3,3>`.
    Write `c = col / 8` for the 16-byte chunk a column falls in. Then
    `c' = c ^ (row mod 8)`, i.e. each row rotates its chunks by a different XOR:

    ```
            chunk: 0  1  2  3  4  5  6  7       (before: row-major)
      row 0:       0  1  2  3  4  5  6  7
      row 1:       1  0  3  2  5  4  7  6
      row 2:       2  3  0  1  6  7  4  5
      row 3:       3  2  1  0  7  6  5  4
      ...
      row 7:       7  6  5  4  3  2  1  0
    ```

    The entry in the table is the physical chunk that holds logical chunk `c`.
    Shared memory has 32 banks of 4 bytes, so one 128-byte row covers every bank
    once and chunk `k` occupies banks `4k..4k+3`. `ldmatrix.x4` reads, per
    8-lane phase, the 16-byte chunk `c` of 8 consecutive rows. Row-major, all 8 land
    in banks `4c..4c+3`: an 8-way conflict. Swizzled, row `r` reads physical chunk
    `c ^ r`, 8 different chunks, so all 32 banks once: conflict-free. The `16-byte
    cp.async` stores of a row (8 lanes, 8 chunks of one row) stay conflict-free
    because XOR with a constant permutes the chunks of a row.

    Other shapes: rows of 32 f16 (64 bytes) want `Swizzle<2,3,3>`; `B = 0` is the
    identity (plain row-major). `compiler/mlir/BankConflicts.h` computes the
    conflict degree of any layout and access pattern;
    `swz-check-bank-conflicts` reports it for every tile spec.

    Constraint (checked): `S >= B`, so the bits read and the bits written do
    not overlap and the map is an involution (applying it twice is the identity),
    and `M + S + B <= 31`.
  }];
  let parameters = (ins "unsigned":$bits, "unsigned":$base, "unsigned":$shift);
  let assemblyFormat = "`<` $bits `,` $base `,` $shift `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Applies the permutation to a linear element offset.
    int64_t apply(int64_t offset) const {
      int64_t yyy = ((int64_t(1) << getBits()) - 1) << (getBase() + getShift());
      return offset ^ ((offset & yyy) >> getShift());
    }
  }];
}

#endif // SWZ_ATTRS_TD
