/**
 * Rename a resource or change its tags, for the resources whose PATCH takes just those two here (a
 * snapshot; a volume, whose backup schedule has its own editor), and switch deletion protection where the
 * resource has it (a volume, a public IP): a modal opened from the row, sending only the fields the user
 * changed (new tags replace the old ones whole; emptied, they remove them all).
 */
import { useState } from 'preact/hooks';
import { TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { formatTags, parseTags } from '../tags.ts';

export interface NameTags {
  name: string;
  tags: Record<string, string>;
  /** Absent on resources without deletion protection (snapshots): no switch then. */
  protection?: { delete: boolean };
}

/** What the dialog edits, as the user typed it (tags as one line). */
export interface NameTagsDraft {
  name: string;
  tags: string;
  protect?: boolean | undefined;
}

export type NameTagsPatch = Partial<NameTags>;

export function nameTagsDraftOf(resource: NameTags): NameTagsDraft {
  return { name: resource.name, tags: formatTags(resource.tags), protect: resource.protection?.delete };
}

export function nameTagsPatch(before: NameTagsDraft, after: NameTagsDraft): NameTagsPatch {
  const body: NameTagsPatch = {};
  if (after.name !== before.name) body.name = after.name;
  if (after.tags !== before.tags) body.tags = parseTags(after.tags);
  if (after.protect !== undefined && after.protect !== before.protect)
    body.protection = { delete: after.protect };
  return body;
}

/** The deletion-protection switch of the edit dialogs (instances, volumes, public IPs). */
export function ProtectionCheck(props: { value: boolean; onValue: (value: boolean) => void }) {
  return (
    <label class="check">
      <input type="checkbox" checked={props.value} onChange={(e) => props.onValue(e.currentTarget.checked)} />
      Deletion protection (deleting is refused until this is off)
    </label>
  );
}

export function NameTagsDialog(props: {
  title: string;
  resource: NameTags;
  /** Sends the PATCH; called only when something changed (the API refuses an empty PATCH). */
  save: (body: NameTagsPatch) => Promise<unknown>;
  onCancel: () => void;
  onSaved: () => void;
}) {
  const [initial] = useState(() => nameTagsDraftOf(props.resource));
  const [draft, setDraft] = useState(initial);
  const submit = async () => {
    const body = nameTagsPatch(initial, draft);
    if (Object.keys(body).length > 0) await props.save(body);
    props.onSaved();
  };
  return (
    <FormDialog modal title={props.title} submitLabel="Save" onSubmit={submit} onCancel={props.onCancel}>
      <TextField label="Name" required value={draft.name} onValue={(name) => setDraft({ ...draft, name })} />
      <TextField
        label="Tags"
        placeholder="env=prod, team=web"
        hint="key=value pairs separated by commas; they replace the current tags, and empty removes them."
        value={draft.tags}
        onValue={(tags) => setDraft({ ...draft, tags })}
      />
      {draft.protect !== undefined && (
        <ProtectionCheck value={draft.protect} onValue={(protect) => setDraft({ ...draft, protect })} />
      )}
    </FormDialog>
  );
}
