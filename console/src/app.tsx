/**
 * The shell: the sign-in gate, the header (account, plan, rate limit, Sign out), the navigation from
 * nav.ts, and the router. Paths live under /console/ (the server answers index.html for all of them).
 */
import { LocationProvider, Route, Router, useLocation } from 'preact-iso';
import { rateLimit, unwrap } from './api.ts';
import { ErrorNotice } from './components/error-notice.tsx';
import { useLoad } from './load.ts';
import { NAV, type NavEntry } from './nav.ts';
import { InstanceCreatePage } from './pages/instance-create.tsx';
import { InstanceDetailPage } from './pages/instance-detail.tsx';
import { NotFoundPage } from './pages/not-found.tsx';
import { SignInPage } from './pages/sign-in.tsx';
import { currentSession, session, signOut } from './session.ts';
import { useSignal } from './signal.ts';

export function App() {
  const signedIn = useSignal(session);
  if (!signedIn) return <SignInPage />;
  return (
    <LocationProvider>
      <Shell />
    </LocationProvider>
  );
}

function Shell() {
  const { path } = useLocation();
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/console/instances">
          Nimbus
        </a>
        <AccountStatus />
      </header>
      <nav class="nav" aria-label="Main">
        <ul>
          {NAV.map((entry) => (
            <li key={entry.path}>
              <a href={entry.path} aria-current={isCurrent(entry, path) ? 'page' : undefined}>
                {entry.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">
        <Router>
          <Route path="/console/instances/new" component={InstanceCreatePage} />
          <Route path="/console/instances/:id" component={InstanceDetailPage} />
          {NAV.map((entry) => (
            <Route key={entry.path} path={entry.path} component={entry.page} />
          ))}
          <Route path="/console" component={NAV[0]!.page} />
          <Route path="/console/" component={NAV[0]!.page} />
          <Route default component={NotFoundPage} />
        </Router>
      </main>
    </>
  );
}

/** The entry whose area `path` is in; /console itself shows the first page. */
function isCurrent(entry: NavEntry, path: string): boolean {
  if (path === '/console' || path === '/console/') return entry === NAV[0];
  return path === entry.path || path.startsWith(`${entry.path}/`);
}

/** Account name, plan and the rate-limit budget left (from the latest answer's X-RateLimit-* headers). */
function AccountStatus() {
  const account = useLoad(() => unwrap(currentSession().api.GET('/v1/account')), []);
  const limit = useSignal(rateLimit);
  return (
    <div class="account">
      {account.data && (
        <span>
          <strong>{account.data.data.name}</strong> <span class="plan">{account.data.data.plan}</span>
        </span>
      )}
      {limit && (
        <span class="muted" title={`Budget refills at ${new Date(limit.reset * 1000).toLocaleTimeString()}`}>
          Rate limit: {limit.remaining}/{limit.limit} left
        </span>
      )}
      <ErrorNotice error={account.error} />
      <button type="button" onClick={() => signOut()}>
        Sign out
      </button>
    </div>
  );
}
