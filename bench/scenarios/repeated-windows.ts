import { errorText } from './context.js';

/**
 * The windows of a scenario run in repetitions, by variant and contender:
 * each repetition's figures, or the error that ends a contender's variant
 * (its later repetitions are skipped).
 */
export class RepeatedWindows<
  F extends { readonly acquisitionsPerSec: number },
> {
  private readonly windows = new Map<string, Map<number, F>>();
  private readonly errors = new Map<string, string>();

  /** Whether `id`'s variant `v` failed already. */
  failed(v: number, id: string): boolean {
    return this.errors.has(slot(v, id));
  }

  /**
   * Runs repetition `rep` of `id`'s variant `v` and keeps its figures; an
   * error is kept instead, and told to `onError`.
   */
  async run(
    v: number,
    id: string,
    rep: number,
    measure: () => Promise<F>,
    onError: (text: string) => void,
  ): Promise<void> {
    const at = slot(v, id);
    try {
      const figures = await measure();
      if (!this.windows.has(at)) this.windows.set(at, new Map());
      this.windows.get(at)!.set(rep, figures);
    } catch (error) {
      this.errors.set(at, errorText(error));
      onError(errorText(error));
    }
  }

  /** `id`'s variant `v` figures, one per repetition that ran. */
  figures(v: number, id: string): F[] {
    return [...(this.windows.get(slot(v, id))?.values() ?? [])];
  }

  error(v: number, id: string): string | undefined {
    return this.errors.get(slot(v, id));
  }

  /** Acquisitions per second by repetition, for per-repetition ratios. */
  rates(v: number, id: string): Map<number, number> {
    return new Map(
      [...(this.windows.get(slot(v, id)) ?? [])].map(
        ([rep, f]) => [rep, f.acquisitionsPerSec] as const,
      ),
    );
  }
}

const slot = (v: number, id: string) => `${v}|${id}`;
