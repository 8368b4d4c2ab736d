import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

/**
 * Two builds of one app: `--mode local` (dist/, with the dev sign-in that only `engram serve`
 * answers) and `--mode aws` (dist-aws/, Cognito only). The dev sign-in module is swapped for
 * an empty one in the AWS build, so none of its code or strings reach those assets.
 * The TypeScript client is compiled from its sources (no build of clients/typescript needed);
 * its one dependency, openapi-fetch, is this package's own.
 */
export default defineConfig(({ mode }) => ({
  base: "/",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  resolve: {
    alias: {
      "@engram/client": here("../clients/typescript/src/index.ts"),
      "openapi-fetch": here("./node_modules/openapi-fetch/dist/index.mjs"),
      "virtual:dev-sign-in": here(
        mode === "aws" ? "./src/auth/dev-sign-in.absent.ts" : "./src/auth/dev-sign-in.tsx",
      ),
    },
  },
  build: { target: "es2022", sourcemap: false, assetsInlineLimit: 0 },
  server: {
    fs: { allow: [here("..")] },
    // `npm run dev` against a running `engram serve` (ENGRAM_URL, default 127.0.0.1:8000)
    proxy: Object.fromEntries(
      ["/v1", "/config.json", "/dev"].map((path) => [
        path,
        { target: process.env.ENGRAM_URL ?? "http://127.0.0.1:8000", changeOrigin: false },
      ]),
    ),
  },
}));
