/**
 * The replicas of the chaos runner: forked once (a tsx start costs about a second on a loaded
 * machine) and given one scenario after the other.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { own } from './processes';
import type { FromReplica, LoadPlan, LoadReport, ToReplica } from './protocol';

/** Longest a replica may take to answer anything: a stuck replica fails the scenario, not the run. */
const ANSWER_TIMEOUT = 60_000;

export class Replica {
  readonly #child: ChildProcess;
  readonly #inbox: FromReplica[] = [];
  #waiter: ((message: FromReplica) => void) | undefined;
  #exited: string | undefined;

  constructor() {
    this.#child = fork(join(__dirname, 'replica.ts'), [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    own(this.#child);
    this.#child.on('message', (message: FromReplica) => {
      const waiter = this.#waiter;
      if (waiter === undefined) this.#inbox.push(message);
      else {
        this.#waiter = undefined;
        waiter(message);
      }
    });
    this.#child.on('exit', (code, signal) => {
      this.#exited = `replica ${this.#child.pid} exited (${code ?? signal})`;
      this.#waiter?.({ type: 'error', message: this.#exited });
    });
  }

  /** Resolves with the next message of `type`; rejects on an error message, exit or timeout. */
  async #next<T extends FromReplica['type']>(type: T): Promise<Extract<FromReplica, { type: T }>> {
    const message =
      this.#inbox.shift() ??
      (this.#exited !== undefined
        ? ({ type: 'error', message: this.#exited } as const)
        : await new Promise<FromReplica>((resolve) => {
            const timer = setTimeout(() => {
              this.#waiter = undefined;
              resolve({
                type: 'error',
                message: `replica ${this.#child.pid} did not answer "${type}" within ${ANSWER_TIMEOUT} ms`,
              });
            }, ANSWER_TIMEOUT);
            this.#waiter = (received) => {
              clearTimeout(timer);
              resolve(received);
            };
          }));
    if (message.type === 'error') throw new Error(message.message);
    if (message.type !== type)
      throw new Error(`replica ${this.#child.pid} answered "${message.type}", expected "${type}"`);
    return message as Extract<FromReplica, { type: T }>;
  }

  #send(message: ToReplica): void {
    if (this.#exited !== undefined) throw new Error(this.#exited);
    this.#child.send(message);
  }

  ready(): Promise<unknown> {
    return this.#next('ready');
  }

  prepare(plan: LoadPlan): Promise<unknown> {
    this.#send({ type: 'prepare', plan });
    return this.#next('prepared');
  }

  async go(): Promise<LoadReport> {
    this.#send({ type: 'go' });
    return (await this.#next('report')).report;
  }

  exit(): void {
    if (this.#exited === undefined) this.#send({ type: 'exit' });
  }
}

export async function startFleet(size: number): Promise<Replica[]> {
  const replicas = Array.from({ length: size }, () => new Replica());
  await Promise.all(replicas.map((replica) => replica.ready()));
  return replicas;
}

/**
 * Runs one load plan on `replicas`, every replica starting at once. `during` runs alongside, from
 * the moment the loads start (it is given that moment): the scenario's fault.
 */
export async function runLoad<T>(
  replicas: readonly Replica[],
  plans: readonly LoadPlan[],
  during: (startedAt: number) => Promise<T>,
): Promise<{ reports: LoadReport[]; fault: T; startedAt: number }> {
  await Promise.all(replicas.map((replica, i) => replica.prepare(plans[i] ?? plans[0]!)));
  const startedAt = Date.now();
  const reports = Promise.all(replicas.map((replica) => replica.go()));
  // Both settle before either is looked at: a failed fault still waits for the replicas to finish.
  const [loadOutcome, faultOutcome] = await Promise.allSettled([reports, during(startedAt)]);
  if (loadOutcome.status === 'rejected') throw loadOutcome.reason;
  if (faultOutcome.status === 'rejected') throw faultOutcome.reason;
  return { reports: loadOutcome.value, fault: faultOutcome.value, startedAt };
}
