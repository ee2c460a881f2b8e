/* Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0 */
/* An installed refdec's C API from C: a drafter copies a reference's continuation. */
#include <refdec/refdec.h>
#include <stdio.h>

int main(void) {
  const refdec_token reference[] = {4, 5, 6, 7};
  const refdec_token_span refs[] = {{reference, 4}};
  const refdec_token prompt[] = {1, 4};
  refdec_drafter* d = NULL;
  refdec_tree tree;
  refdec_token chain[4];
  size_t n = 0;
  if (refdec_drafter_create_llma(NULL, &d) != REFDEC_OK || refdec_drafter_begin(d, prompt, 2, refs, 1) != REFDEC_OK ||
      refdec_drafter_draft(d, 4, 3, 8, &tree) != REFDEC_OK || refdec_tree_best_chain(&tree, chain, 4, &n) != REFDEC_OK) {
    fprintf(stderr, "refdec: %s\n", refdec_last_error());
    return 1;
  }
  refdec_drafter_destroy(d);
  printf("C API %d: drafted %zu tokens after 4: %d %d %d\n", refdec_c_api_version(), n, chain[0], chain[1], chain[2]);
  return n == 3 && chain[0] == 5 && chain[1] == 6 && chain[2] == 7 ? 0 : 1;
}
