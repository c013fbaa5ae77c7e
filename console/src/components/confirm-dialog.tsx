/**
 * Asks before a destructive action, in a native modal <dialog> (focus is trapped and Escape cancels).
 * `useConfirm()` gives a `confirm(question)` promise, `ask(question, action)` that runs the action only
 * on yes (usually `() => attempt(...)` of useAttempt), and the element to render once.
 */
import { useState } from 'preact/hooks';
import { useModal } from './modal.ts';

interface Question {
  title: string;
  body: string;
  confirmLabel: string;
  resolve: (yes: boolean) => void;
}

export function useConfirm() {
  const [question, setQuestion] = useState<Question | null>(null);
  const confirm = (title: string, body: string, confirmLabel: string) =>
    new Promise<boolean>((resolve) => setQuestion({ title, body, confirmLabel, resolve }));
  const ask = async (title: string, body: string, confirmLabel: string, action: () => unknown) => {
    if (await confirm(title, body, confirmLabel)) await action();
  };
  const answer = (yes: boolean) => {
    question?.resolve(yes);
    setQuestion(null);
  };
  return { confirm, ask, dialog: question ? <ConfirmDialog question={question} onAnswer={answer} /> : null };
}

function ConfirmDialog({ question, onAnswer }: { question: Question; onAnswer: (yes: boolean) => void }) {
  const ref = useModal();
  return (
    <dialog
      ref={ref}
      aria-labelledby="confirm-title"
      onCancel={(event) => {
        event.preventDefault();
        onAnswer(false);
      }}
    >
      <h2 id="confirm-title">{question.title}</h2>
      <p>{question.body}</p>
      <div class="actions">
        <button type="button" onClick={() => onAnswer(false)}>
          Cancel
        </button>
        <button type="button" class="danger" onClick={() => onAnswer(true)}>
          {question.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
