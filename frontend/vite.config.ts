/// <reference types="vitest/config" />
// Build: `npm run build` writes ../webapp/console/dist/ (package data of the wheel), which every node serves at
// /console/ (webapp/console/middleware.py).
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  base: "/console/",
  plugins: [react()],
  build: { outDir: "../webapp/console/dist", emptyOutDir: true },
  // `npm run dev` against a node on 8083: same-origin paths are proxied to it
  server: {
    proxy: Object.fromEntries(
      ["/connectors", "/connector-plugins", "/raftconnect", "/admin", "/static"].map((p) => [p, "http://127.0.0.1:8083"]),
    ),
  },
  test: { environment: "jsdom", include: ["src/**/*.test.{ts,tsx}"], setupFiles: ["src/test-setup.ts"], testTimeout: 60000 },
});
