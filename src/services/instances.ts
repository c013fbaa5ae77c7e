/**
 * Instances: the user's requests (create, change, act, delete) as rules over the store. Each request
 * validates, then in one transaction checks the instance's status against the state machine
 * (domain/instance-states.ts), writes the new status guarded by the version it read, records the event,
 * and enqueues the instance's reconcile job; the reconciler (instance-reconciler.ts) then drives the
 * machine through the driver. So a request answers at once (202) and survives a crash right after.
 */
import { lowestFree, macAddressFor, PRIVATE_NETWORKS, parseCidr } from '../domain/addresses.js';
import { IMAGES, type InstanceType, regionsOffering } from '../domain/catalog.js';
import type { Clock } from '../domain/clock.js';
import { newId } from '../domain/ids.js';
import { DEFAULT_FIREWALL_PRESET, TAG_KEY_PATTERN, USER_DATA_MAX_BYTES } from '../domain/instance-rules.js';
import { ALLOWED_FROM, type InstanceAction, isAllowed } from '../domain/instance-states.js';
import type { Page, PageRequest } from '../domain/pagination.js';
import { FAULT_TAG, FAULTS } from '../drivers/simulator/simulator.js';
import { recordEvent } from '../events/outbox.js';
import type { JobRunner } from '../jobs/runner.js';
import { lockAccount } from '../store/accounts.js';
import type { Store } from '../store/db.js';
import * as instances from '../store/instances.js';
import type { Executor, InstanceRow } from '../store/schema.js';
import { insertVolume, resizeVolume } from '../store/volumes.js';
import { Conflict, InvalidRequest, NotFound, PaymentRequired, ServiceUnavailable } from './errors.js';
import { type BackupSchedule, hostnames, type InstanceView, instanceView, typeOf } from './instance-view.js';
import type { Principal } from './principal.js';
import type { QuotaService } from './quotas.js';
import type { SshKeyService } from './ssh-keys.js';

export const RECONCILE_JOB = 'instance';

export interface NewInstance {
  name: string;
  instance_type: string;
  region: string;
  image: string;
  ssh_keys?: string[] | undefined;
  tags?: Record<string, string> | undefined;
  user_data?: string | undefined;
  encryption_key_id?: string | undefined;
  firewall_preset?: string | undefined;
  monitoring?: boolean | undefined;
  backup_schedule?: BackupSchedule | null | undefined;
}

export interface InstanceUpdate {
  name?: string | undefined;
  tags?: Record<string, string> | undefined;
  monitoring?: boolean | undefined;
  backup_schedule?: BackupSchedule | null | undefined;
}

export interface InstanceListQuery extends PageRequest<instances.InstanceSort> {
  status?: string | undefined;
  region?: string | undefined;
  name?: string | undefined;
  /** `key:value` each. */
  tag?: string[] | undefined;
}

export interface NetworkView {
  instance_id: string;
  public_ip: string;
  private_ip: string;
  mac_address: string;
  hostname: string;
  internal_hostname: string;
  private_network: { region: string; cidr: string };
  firewall_preset: string;
  firewall_rules: Record<string, unknown>[];
  private_traffic_free: boolean;
  note: string;
}

export interface InstanceMetadata {
  'instance-id': string;
  'instance-type': string;
  'public-ipv4': string;
  'local-ipv4': string;
  hostname: string;
  'user-data': string | null;
}

export interface InstanceServiceOptions {
  publicDomain: string;
  gpuCapacity: Record<string, number>;
  publicIpPools: Record<string, string>;
}

const gpusOf = (type: InstanceType) => type.gpu?.count ?? 0;

export class InstanceService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    private readonly quotas: QuotaService,
    private readonly sshKeys: SshKeyService,
    private readonly options: InstanceServiceOptions,
  ) {
    quotas.register('instances', instances.countAccountInstances);
    quotas.register('vcpus', (db, accountId) => this.sumOverTypes(db, accountId, (t) => t.vcpus));
    quotas.register('gpus', (db, accountId) => this.sumOverTypes(db, accountId, gpusOf));
  }

  async create(principal: Principal, input: NewInstance): Promise<InstanceView> {
    refuseIfPastDue(principal, 'create instances');
    const type = typeOf(input.instance_type);
    checkPlacement(type, input.region, input.image);
    checkUserData(input.user_data);
    checkTags(input.tags);
    const accountId = principal.accountId;
    const row = await this.store.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      const sshKeyIds = await this.sshKeys.resolve(trx, accountId, input.ssh_keys ?? []);
      await this.quotas.ensureRoom(trx, accountId, 'instances', 1);
      await this.quotas.ensureRoom(trx, accountId, 'vcpus', type.vcpus);
      await this.quotas.ensureRoom(trx, accountId, 'gpus', gpusOf(type));
      await instances.lockRegion(trx, input.region);
      await this.reserveGpus(trx, input.region, gpusOf(type));
      const now = this.clock.now();
      const at = now.toISOString();
      const id = newId('instance', now);
      const rootVolumeId = newId('volume', now);
      const addresses = await this.allocateAddresses(trx, accountId, input.region);
      await insertVolume(trx, {
        id: rootVolumeId,
        account_id: accountId,
        name: `${input.name}-root`,
        region: input.region,
        size_gb: type.storage_gb,
        status: 'in-use',
        kind: 'root',
        instance_id: id,
        created_at: at,
        updated_at: at,
      });
      const row: InstanceRow = {
        id,
        account_id: accountId,
        name: input.name,
        status: 'starting',
        operation: 'create',
        operation_at: at,
        instance_type: type.name,
        region: input.region,
        image: input.image,
        ssh_key_ids: JSON.stringify(sshKeyIds),
        public_ip: addresses.publicIp,
        private_ip: addresses.privateIp,
        tags: JSON.stringify(input.tags ?? {}),
        user_data: input.user_data ?? null,
        encryption_key_id: input.encryption_key_id ?? null,
        firewall_preset: input.firewall_preset ?? DEFAULT_FIREWALL_PRESET,
        monitoring: input.monitoring === false ? 0 : 1,
        backup_schedule: input.backup_schedule ? JSON.stringify(input.backup_schedule) : null,
        root_volume_id: rootVolumeId,
        version: 1,
        created_at: at,
        updated_at: at,
      };
      await instances.insertInstance(trx, row);
      await this.recordInstanceEvent(trx, 'instance.created', row);
      await this.jobs.enqueue(trx, RECONCILE_JOB, id);
      return row;
    });
    this.jobs.wake();
    return this.view(row, true);
  }

  async list(accountId: string, query: InstanceListQuery): Promise<Page<InstanceView>> {
    const tags = (query.tag ?? []).map(parseTagFilter);
    const page = await instances.listInstances(
      this.store.db,
      accountId,
      { status: query.status, region: query.region, name: query.name, tags },
      query,
    );
    return { items: page.items.map((row) => this.view(row, false)), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<InstanceView> {
    return this.view(await this.find(this.store.db, accountId, id), true);
  }

  async update(accountId: string, id: string, changes: InstanceUpdate): Promise<InstanceView> {
    checkTags(changes.tags);
    const updated = await this.act(accountId, id, 'update', (row) => ({
      ...(changes.name !== undefined ? { name: changes.name } : {}),
      ...(changes.tags !== undefined ? { tags: JSON.stringify(changes.tags) } : {}),
      ...(changes.monitoring !== undefined ? { monitoring: changes.monitoring ? 1 : 0 } : {}),
      ...(changes.backup_schedule !== undefined
        ? { backup_schedule: changes.backup_schedule ? JSON.stringify(changes.backup_schedule) : null }
        : {}),
      // A changed fault tag can release a machine stuck on it, so the reconciler looks again.
      reconcile: changes.tags !== undefined && row.tags !== JSON.stringify(changes.tags),
      event: 'instance.updated',
      eventData: {
        changed: Object.keys(changes).filter((k) => changes[k as keyof InstanceUpdate] !== undefined),
      },
    }));
    return this.view(updated, true);
  }

  async start(principal: Principal, id: string): Promise<InstanceView> {
    refuseIfPastDue(principal, 'start instances');
    return this.view(
      await this.act(principal.accountId, id, 'start', () => this.operation('starting', 'start')),
      true,
    );
  }

  async stop(accountId: string, id: string, options: { force: boolean }): Promise<InstanceView> {
    if (!options.force) {
      return this.view(await this.act(accountId, id, 'stop', () => this.operation('stopping', 'stop')), true);
    }
    // Immediate: the instance is stopped now; the reconciler powers the machine off right after.
    const stopped = await this.act(accountId, id, 'force_stop', (row) => ({
      // An interrupted resize still finishes its type change while stopped, and reports it.
      ...this.operation('stopped', row.operation === 'resize' ? 'resize' : null),
      event: 'instance.stopped',
      eventData: { forced: true },
    }));
    return this.view(stopped, true);
  }

  async restart(accountId: string, id: string): Promise<InstanceView> {
    return this.view(
      await this.act(accountId, id, 'restart', () => this.operation('stopping', 'restart')),
      true,
    );
  }

  async resize(principal: Principal, id: string, instanceType: string): Promise<InstanceView> {
    const next = typeOf(instanceType);
    const accountId = principal.accountId;
    const updated = await this.act(accountId, id, 'resize', async (row, trx) => {
      const current = typeOf(row.instance_type);
      if (next.name === current.name) {
        throw new InvalidRequest(`The instance is already ${current.name}`, {
          field: 'instance_type',
          value: instanceType,
        });
      }
      if (next.storage_gb < current.storage_gb) {
        throw new InvalidRequest(
          `A root disk cannot shrink: ${current.name} has ${current.storage_gb} GB, ${next.name} only ${next.storage_gb} GB`,
          { field: 'instance_type', value: instanceType, current_storage_gb: current.storage_gb },
        );
      }
      checkPlacement(next, row.region, row.image);
      await lockAccount(trx, accountId);
      const vcpuDelta = next.vcpus - current.vcpus;
      const gpuDelta = gpusOf(next) - gpusOf(current);
      if (vcpuDelta > 0) await this.quotas.ensureRoom(trx, accountId, 'vcpus', vcpuDelta);
      if (gpuDelta > 0) await this.quotas.ensureRoom(trx, accountId, 'gpus', gpuDelta);
      if (gpuDelta > 0) {
        await instances.lockRegion(trx, row.region);
        await this.reserveGpus(trx, row.region, gpuDelta);
      } else if (gpuDelta < 0) {
        await instances.releaseGpus(trx, row.region, -gpuDelta);
      }
      await resizeVolume(trx, row.root_volume_id, next.storage_gb, this.clock.now().toISOString());
      // From running: stop, change, start. From stopped: just change; the instance stays stopped.
      return {
        ...this.operation(row.status === 'running' ? 'stopping' : 'stopped', 'resize'),
        instance_type: next.name,
      };
    });
    return this.view(updated, true);
  }

  async delete(accountId: string, id: string): Promise<InstanceView> {
    return this.view(
      await this.act(accountId, id, 'delete', () => this.operation('deleting', 'delete')),
      true,
    );
  }

  async network(accountId: string, id: string): Promise<NetworkView> {
    const row = await this.find(this.store.db, accountId, id);
    return {
      instance_id: row.id,
      public_ip: row.public_ip,
      private_ip: row.private_ip,
      mac_address: macAddressFor(row.id),
      ...hostnames(row, this.options.publicDomain),
      private_network: { region: row.region, cidr: privateNetworkOf(row.region).cidr },
      firewall_preset: row.firewall_preset,
      firewall_rules: [],
      private_traffic_free: true,
      note: 'Traffic between your instances over their private IPv4 addresses is free of data-transfer charges.',
    };
  }

  /** What the metadata service tells the instance about itself; null for an unknown instance. */
  async metadata(instanceId: string): Promise<InstanceMetadata | null> {
    const row = await instances.findInstance(this.store.db, instanceId);
    if (!row) return null;
    return {
      'instance-id': row.id,
      'instance-type': row.instance_type,
      'public-ipv4': row.public_ip,
      'local-ipv4': row.private_ip,
      hostname: hostnames(row, this.options.publicDomain).hostname,
      'user-data': row.user_data,
    };
  }

  private operation(status: string, operation: string | null) {
    return {
      status,
      operation,
      operation_at: operation === null ? null : this.clock.now().toISOString(),
      reconcile: true,
    };
  }

  /**
   * One request on one instance, in one transaction: read and hold it, check the action is allowed from
   * its status (concurrent requests take turns, so the second sees what the first wrote and is a 409
   * only if that status does not allow it), apply `change` guarded by the version read, record the
   * event, enqueue the reconciler.
   */
  private async act(
    accountId: string,
    id: string,
    action: InstanceAction,
    change: (row: InstanceRow, trx: Executor) => PlannedChange | Promise<PlannedChange>,
  ): Promise<InstanceRow> {
    const updated = await this.store.db.transaction().execute(async (trx) => {
      const row = await instances.lockAccountInstance(trx, accountId, id);
      if (!row) throw new NotFound('instance', id);
      if (!isAllowed(action, row.status)) throw conflict(action, row.status);
      const { reconcile, event, eventData, ...columns } = await change(row, trx);
      // The row is held, so its version still matches; the guard stays, the rule every writer follows.
      const next = await instances.updateInstance(trx, row, {
        ...columns,
        updated_at: this.clock.now().toISOString(),
      });
      if (!next) throw conflict(action, row.status);
      if (event) await this.recordInstanceEvent(trx, event, next, eventData);
      if (reconcile) await this.jobs.enqueue(trx, RECONCILE_JOB, id);
      return { next, reconcile };
    });
    if (updated.reconcile) this.jobs.wake();
    return updated.next;
  }

  async recordInstanceEvent(
    trx: Executor,
    type: string,
    row: InstanceRow,
    extra: Record<string, unknown> = {},
  ) {
    await recordEvent(trx, this.clock, {
      accountId: row.account_id,
      type,
      resourceId: row.id,
      data: { instance_id: row.id, name: row.name, status: row.status, ...extra },
    });
  }

  private async find(db: Executor, accountId: string, id: string): Promise<InstanceRow> {
    const row = await instances.findAccountInstance(db, accountId, id);
    if (!row) throw new NotFound('instance', id);
    return row;
  }

  private view(row: InstanceRow, withUserData: boolean): InstanceView {
    return instanceView(row, this.options.publicDomain, withUserData);
  }

  private async sumOverTypes(db: Executor, accountId: string, measure: (type: InstanceType) => number) {
    let total = 0;
    for (const [name, count] of await instances.countByType(db, accountId))
      total += measure(typeOf(name)) * count;
    return total;
  }

  private async reserveGpus(trx: Executor, region: string, gpus: number): Promise<void> {
    if (gpus === 0) return;
    const capacity = this.options.gpuCapacity[region] ?? 0;
    if (!(await instances.reserveGpus(trx, region, gpus, capacity))) {
      throw new ServiceUnavailable(
        `${region} has no capacity left for ${gpus} more GPU(s); try another region or later`,
        {
          reason: 'insufficient_capacity',
          region,
          requested_gpus: gpus,
        },
      );
    }
  }

  private async allocateAddresses(trx: Executor, accountId: string, region: string) {
    const pool = this.options.publicIpPools[region];
    const publicIp = pool ? lowestFree(parseCidr(pool), await instances.publicIpsInUse(trx, region)) : null;
    if (!publicIp) {
      throw new ServiceUnavailable(`${region} has no public IPv4 address left; try another region or later`, {
        reason: 'insufficient_capacity',
        region,
        resource: 'public_ipv4',
      });
    }
    const privateIp = lowestFree(
      privateNetworkOf(region),
      await instances.privateIpsInUse(trx, accountId, region),
    );
    if (!privateIp) {
      throw new Conflict(`Your private network in ${region} has no free address left`, { region });
    }
    return { publicIp, privateIp };
  }
}

interface PlannedChange extends instances.InstanceChanges {
  reconcile?: boolean;
  event?: string;
  eventData?: Record<string, unknown>;
}

function privateNetworkOf(region: string) {
  return parseCidr(PRIVATE_NETWORKS[region] ?? '10.250.0.0/16');
}

function conflict(action: InstanceAction, status: string): Conflict {
  const allowed = ALLOWED_FROM[action];
  const verb = action === 'force_stop' ? 'force-stop' : action;
  return new Conflict(`Cannot ${verb} an instance that is ${status}; allowed from: ${allowed.join(', ')}`, {
    current_status: status,
    allowed_statuses: [...allowed],
  });
}

function refuseIfPastDue(principal: Principal, what: string): void {
  if (principal.accountStatus === 'past_due') {
    throw new PaymentRequired(
      `This account is past due: you cannot ${what} until it is settled. Reading and deleting still work.`,
    );
  }
}

/** GPU types only where the catalogue offers them, and only with images that carry GPU drivers. */
function checkPlacement(type: InstanceType, region: string, image: string): void {
  const regions = regionsOffering(type);
  if (!regions.includes(region)) {
    throw new InvalidRequest(`${type.name} is not offered in ${region}`, {
      field: 'region',
      value: region,
      allowed_values: regions,
    });
  }
  if (type.gpu) {
    const images = IMAGES.filter((i) => i.gpu_compatible).map((i) => i.name);
    if (!images.includes(image)) {
      throw new InvalidRequest(`${type.name} needs an image with GPU support`, {
        field: 'image',
        value: image,
        allowed_values: images,
      });
    }
  }
}

function checkUserData(userData: string | undefined): void {
  if (userData !== undefined && Buffer.byteLength(userData, 'utf8') > USER_DATA_MAX_BYTES) {
    throw new InvalidRequest(
      `user_data is ${Buffer.byteLength(userData, 'utf8')} bytes; the limit is 16 KiB`,
      {
        field: 'user_data',
        limit_bytes: USER_DATA_MAX_BYTES,
      },
    );
  }
}

const tagKeyPattern = new RegExp(TAG_KEY_PATTERN);

function checkTags(tags: Record<string, string> | undefined): void {
  for (const key of Object.keys(tags ?? {})) {
    if (!tagKeyPattern.test(key)) {
      throw new InvalidRequest(
        'Tag keys are 1–128 characters of letters, digits, ".", "_", "/" and "-" (no ":", which tag filters split on)',
        { field: 'tags', value: key },
      );
    }
  }
  const fault = tags?.[FAULT_TAG];
  if (fault !== undefined && !(FAULTS as readonly string[]).includes(fault)) {
    throw new InvalidRequest(`Unknown simulator fault "${fault}"`, {
      field: `tags.${FAULT_TAG}`,
      value: fault,
      allowed_values: [...FAULTS],
    });
  }
}

function parseTagFilter(filter: string): [string, string] {
  const colon = filter.indexOf(':');
  if (colon <= 0) {
    throw new InvalidRequest('tag filters are key:value', { field: 'tag', value: filter });
  }
  return [filter.slice(0, colon), filter.slice(colon + 1)];
}
