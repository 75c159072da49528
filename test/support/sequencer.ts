import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { classifyTestFiles, runsCampaign } from '../../.ci/test-files.js';
import path from 'node:path';

/**
 * The order files start in: the campaigns (chaos, fuzz) first, then the other files that start
 * processes, then the rest; within each group vitest's own order (the longest first when its cache
 * knows the durations, else the largest file first). On a clean checkout vitest has no durations and
 * started the chaos smoke run, a small file that takes minutes, among the last: one worker ran it
 * alone while the other had nothing left. The longest first leaves the short files to fill in.
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const spawning = new Set(classifyTestFiles(root).spawning.map((f) => path.resolve(root, f)));
    const group = (spec: TestSpecification) => (runsCampaign(spec.moduleId) ? 0 : spawning.has(path.resolve(spec.moduleId)) ? 1 : 2);
    // Array.prototype.sort is stable: within a group, vitest's order stands.
    return ordered.sort((a, b) => group(a) - group(b));
  }
}
