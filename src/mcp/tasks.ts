import type { CallToolResult } from '@modelcontextprotocol/server';

/** The 2026-07-28 tasks extension: a long tool call answered with a task the client polls. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** How often a client should poll `tasks/get` (ms). */
const POLL_INTERVAL_MS = 5_000;

type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** A task as `tasks/get` answers it (and, without `result`, as the starting call does). */
export interface TaskState {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** Null: the task lives as long as its job (until the job is deleted). */
  ttlMs: null;
  pollIntervalMs: number;
  result?: CallToolResult;
}

/**
 * A tool whose call starts a durable job in Herald, served as a task: the job's id is the task's,
 * `get` reads it and `cancel` stops it, both as tools (so with the same policy checks, under the
 * caller's own bridge client), and `state` maps the job (the tools' structured answer) onto a task.
 */
export interface TaskTool {
  /** The task id's prefix, naming the kind of job. */
  prefix: string;
  /** The tool that reads a job, and its argument naming the job. */
  get: string;
  /** The tool that stops one. */
  cancel: string;
  idArg: string;
  /** The job's id in a start's or read's structured answer. */
  id(job: Record<string, unknown>): string | undefined;
  /** The task a job's structured answer is (its result the tool's answer, once the job ended). */
  state(job: Record<string, unknown>, answer: CallToolResult): Omit<TaskState, 'taskId' | 'ttlMs' | 'pollIntervalMs'>;
}

/**
 * The media archive's scrape (ScrapeJob, openapi/archive.yaml): running or paused is working (a
 * pause says why), completed completes with the scrape as result, failed completes with the scrape
 * as a tool error (the tool ran; the scrape failed), stopped is cancelled.
 */
const SCRAPE: TaskTool = {
  prefix: 'scrape:',
  get: 'get_media_scrape',
  cancel: 'stop_media_scrape',
  idArg: 'scrapeId',
  id: (job) => (typeof job['id'] === 'string' ? job['id'] : undefined),
  state(job, answer) {
    const times = { createdAt: String(job['createdAt']), lastUpdatedAt: String(job['updatedAt']) };
    switch (job['state']) {
      case 'completed':
        return { ...times, status: 'completed', result: answer };
      case 'failed':
        return { ...times, status: 'completed', statusMessage: `The scrape failed: ${String(job['lastError'] ?? 'no reason recorded')}`, result: { ...answer, isError: true } };
      case 'stopped':
        return { ...times, status: 'cancelled', statusMessage: 'The scrape was stopped.' };
      case 'paused':
        return { ...times, status: 'working', statusMessage: `Paused by Herald: ${String(job['pauseReason'] ?? 'no reason recorded')}. It resumes with scrape_media.` };
      default:
        return { ...times, status: 'working', statusMessage: `Scraping: ${String(job['messagesSeen'])} messages seen, ${String(job['itemsFound'])} items found.` };
    }
  },
};

/** The tools served as tasks, by name. */
export const TASK_TOOLS: ReadonlyMap<string, TaskTool> = new Map([['scrape_media', SCRAPE]]);

/** A task's full state from a job's answer. */
export function taskState(kind: TaskTool, taskId: string, answer: CallToolResult): TaskState {
  return { taskId, ttlMs: null, pollIntervalMs: POLL_INTERVAL_MS, ...kind.state((answer.structuredContent ?? {}) as Record<string, unknown>, answer) };
}

/** The kind and job id a task id names, or undefined. */
export function taskOf(taskId: string): { kind: TaskTool; id: string } | undefined {
  for (const kind of TASK_TOOLS.values()) if (taskId.startsWith(kind.prefix) && taskId.length > kind.prefix.length) return { kind, id: taskId.slice(kind.prefix.length) };
  return undefined;
}
