#!/bin/bash
# two nodes of four GPUs
torchrun --nnodes 2 --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint $HOST:29500 \
    train.py --per_device_train_batch_size 8 --gradient_accumulation_steps 4 \
    --fp16 --learning_rate 2e-4 --warmup_steps 100 --max_grad_norm 1.0
