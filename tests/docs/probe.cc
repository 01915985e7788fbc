// Never run: tests/docs/cpp_build.py reuses the commands that compile and link this file.
int main() {
  return 0;
}
