// Starts Browserless with its Chromium routes only, on the Chromium named by
// CDP_SUPERVISOR_CHROMIUM (the system one: no browser download), for tests/it/e2e_browserless.rs.
// Copied into the install directory (where '@browserless.io/browserless' resolves) by the test.
// HOST, PORT, TOKEN, CONCURRENT, QUEUED and TIMEOUT are Browserless's own settings.
const chromium = process.env.CDP_SUPERVISOR_CHROMIUM;
if (!chromium) {
  console.error('CDP_SUPERVISOR_CHROMIUM is not set');
  process.exit(2);
}
// Browserless launches what Playwright's Chromium would be (and looks for it as it loads):
// point that at ours first.
const { default: playwright } = await import('playwright-core');
playwright.chromium.executablePath = () => chromium;
const {
  Browserless, BrowserlessChromeRoutes, BrowserlessEdgeRoutes, BrowserlessFirefoxRoutes,
  BrowserlessWebKitRoutes,
} = await import('@browserless.io/browserless');

const browserless = new Browserless();
for (const routes of [BrowserlessChromeRoutes, BrowserlessEdgeRoutes, BrowserlessFirefoxRoutes,
                      BrowserlessWebKitRoutes]) {
  browserless.disableRoutes(...Object.values(routes));
}
// The test ends us with SIGTERM: close the browsers we launched (each in a process group of
// its own) before exiting.
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, async () => {
    try {
      await browserless.stop();
    } finally {
      process.exit(0);
    }
  });
}
await browserless.start();
