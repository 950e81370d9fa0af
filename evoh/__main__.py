"""`python -m evoh` runs the CLI, so `accelerate launch -m evoh ...` and `torchrun -m evoh ...` work."""

from evoh.cli.app import main

if __name__ == "__main__":
    main()
